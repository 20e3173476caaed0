// render.js helpers that need no DOM: `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { utf16Offset } from "../../static/render.js";

test("utf16Offset() turns the server's code-point offsets into JavaScript string offsets", () => {
  const text = "我很好。𠀋你好吗？"; // 𠀋 is outside the BMP: one code point, two UTF-16 units
  assert.equal(utf16Offset(text, 4), 4);
  assert.equal(utf16Offset(text, 5), 6);
  assert.equal(text.slice(utf16Offset(text, 5), utf16Offset(text, 9)), "你好吗？");
  assert.equal(utf16Offset(text, 99), text.length);
});
