// The output pane of the live page, and the link between a translated sentence and its source.
// No network here: app.js feeds stream events in.
//
// Every source segment's translation gets its own <span class="segment" data-segment=i>; layout
// deltas (index -1: the "\n\n" or " " the server puts between segments) go between the spans as
// plain text, so paragraphs are kept and each span holds exactly one sentence.
//
// Highlighting the source sentence: a <textarea> cannot style a range of its text, so a "backdrop"
// sits under the transparent textarea and mirrors its text with the same font, padding, border and
// wrapping (style.css `.editor`); the mirrored text is transparent and only a <mark> around the
// source sentence shows. The textarea stays a plain, editable, accessible textarea. The backdrop
// follows the textarea's scroll position.

/** The output pane's content for one translation, built from stream events. */
export class Rendering {
  /**
   * @param {HTMLElement} output  the pane; its content is replaced
   * @param {string} sourceText   the text being translated (segment spans index into it)
   */
  constructor(output, sourceText) {
    this.output = output;
    this.sourceText = sourceText;
    this.translation = ""; // the joined deltas so far
    this.spans = []; // per segment: [start, end) in sourceText, as UTF-16 offsets
    this.segments = new Map(); // segment index -> <span>
    this.cursor = document.createElement("span");
    this.cursor.className = "cursor";
    this.cursor.setAttribute("aria-hidden", "true");
    output.replaceChildren(this.cursor);
  }

  /** The `start` event: remember where each segment is in the source. */
  start(event) {
    // The server counts characters as code points; JavaScript strings index UTF-16 code units.
    const at = (codePoints) => utf16Offset(this.sourceText, codePoints);
    this.spans = event.segments.map((segment) => [at(segment.start), at(segment.end)]);
  }

  /** A `delta` event: its text goes into its segment's span, or between spans if it is layout. */
  delta(event) {
    const output = this.output;
    const following = output.scrollHeight - output.scrollTop - output.clientHeight < 24;
    this.translation += event.text;
    if (event.index < 0) {
      this.cursor.before(event.text);
    } else {
      this.segmentSpan(event.segment).append(event.text);
    }
    if (following) output.scrollTop = output.scrollHeight; // keep the newest text in view
  }

  /** A `segment` event: that sentence is complete. */
  segment(event) {
    this.segmentSpan(event.index).classList.add("complete");
  }

  /** The stream is over (done, error, stopped): remove the streaming cursor. */
  finish() {
    this.cursor.remove();
  }

  /** The segment whose source span contains the UTF-16 offset, or -1. */
  segmentAt(offset) {
    return this.spans.findIndex(([start, end]) => offset >= start && offset < end);
  }

  segmentSpan(index) {
    let span = this.segments.get(index);
    if (!span) {
      span = document.createElement("span");
      span.className = "segment";
      span.dataset.segment = String(index);
      this.cursor.before(span);
      this.segments.set(index, span);
    }
    return span;
  }
}

/**
 * UTF-16 offset in `text` of the code point at index `codePoints`.
 * @param {string} text
 * @param {number} codePoints
 * @returns {number}
 */
export function utf16Offset(text, codePoints) {
  let offset = 0;
  for (let i = 0; i < codePoints && offset < text.length; i++) {
    offset += text.codePointAt(offset) > 0xffff ? 2 : 1;
  }
  return offset;
}

/** Highlights one segment on both sides: its translated span and, in the backdrop, its source. */
export class Highlighter {
  /**
   * @param {{source: HTMLTextAreaElement, backdrop: HTMLElement, mirror: HTMLElement,
   *          output: HTMLElement}} elements
   */
  constructor({ source, backdrop, mirror, output }) {
    Object.assign(this, { source, backdrop, mirror, output });
    this.index = -1; // the highlighted segment
  }

  /**
   * Highlight segment `index` of `rendering` (-1: none). `from` is the side the user points at
   * ("output" for the pointer, "source" for the caret): the other side scrolls to show the partner.
   * @param {Rendering|null} rendering
   * @param {number} index
   * @param {"output"|"source"|null} [from]
   */
  show(rendering, index, from = null) {
    for (const span of this.output.querySelectorAll(".segment.active")) span.classList.remove("active");
    const span = rendering?.spans[index];
    // Offsets are only meaningful while the textarea still holds the text that was translated.
    if (!span || rendering.sourceText !== this.source.value) {
      this.index = -1;
      this.mirror.replaceChildren();
      return;
    }
    this.index = index;
    const translated = rendering.segments.get(index);
    translated?.classList.add("active");
    if (from === "source") translated?.scrollIntoView({ block: "nearest" });

    const text = rendering.sourceText;
    const mark = document.createElement("mark");
    mark.textContent = text.slice(span[0], span[1]);
    // A trailing newline needs something after it to take up its line, as in the textarea.
    this.mirror.replaceChildren(text.slice(0, span[0]), mark, text.slice(span[1]) + " ");
    if (from === "output") {
      const { scrollTop, clientHeight } = this.source;
      const top = mark.offsetTop;
      if (top < scrollTop || top + mark.offsetHeight > scrollTop + clientHeight) {
        this.source.scrollTop = top - clientHeight / 3;
      }
    }
    this.syncScroll();
  }

  /** Keep the backdrop aligned with the textarea (call on its scroll events). */
  syncScroll() {
    this.backdrop.scrollTop = this.source.scrollTop;
  }
}
