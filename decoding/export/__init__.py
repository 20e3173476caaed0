"""Converters that turn trained models into liuyi bundles (need the ``[export]`` extra).

python -m decoding.export SRC OUT [--int8]      # a Hugging Face Marian checkpoint
python -m decoding.export.cn2en --source DIR OUT  # the bundled default zh->en model
"""
