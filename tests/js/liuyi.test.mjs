// Unit tests for static/liuyi.js under Node's built-in runner: `node --test tests/js/`.
// The parser is fed bytes cut at awkward places; translateStream() runs against a fake fetch().
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  LiuyiError,
  NdjsonDecoder,
  ndjsonEvents,
  parseRetryAfter,
  translateStream,
} from "../../static/liuyi.js";

const encode = (text) => new TextEncoder().encode(text);

/** Feed `bytes` to a fresh decoder in pieces cut at `cuts` (byte offsets); all events in order. */
function decodeInPieces(bytes, cuts) {
  const decoder = new NdjsonDecoder();
  const events = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    events.push(...decoder.push(bytes.subarray(from, cut)));
    from = cut;
  }
  events.push(...decoder.flush());
  return events;
}

/** A ReadableStream that delivers exactly these chunks, one per read. */
function chunked(chunks) {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

const STREAM = [
  { type: "start", id: "r1", segments: [{ index: 0, start: 0, end: 4 }] },
  { type: "delta", text: "我很", index: 0, segment: 0 },
  { type: "delta", text: "好。", index: 1, segment: 0 },
  { type: "done", translation: "我很好。", cached: false },
];
const NDJSON_BYTES = encode(STREAM.map((e) => JSON.stringify(e) + "\n").join(""));

describe("NdjsonDecoder", () => {
  test("a line split across reads is emitted once, when its newline arrives", () => {
    const decoder = new NdjsonDecoder();
    assert.deepEqual(decoder.push(encode('{"type":"de')), []);
    assert.deepEqual(decoder.push(encode('lta","text":"hi"}')), []);
    assert.deepEqual(decoder.push(encode("\n")), [{ type: "delta", text: "hi" }]);
    assert.deepEqual(decoder.flush(), []);
  });

  test("several lines in one read are all emitted, in order", () => {
    const decoder = new NdjsonDecoder();
    assert.deepEqual(decoder.push(NDJSON_BYTES), STREAM);
  });

  test("a multi-byte character split across reads is decoded whole", () => {
    const line = encode('{"type":"delta","text":"好"}\n');
    const start = line.indexOf(0xe5); // 好 is E5 A5 BD in UTF-8
    for (const cut of [start + 1, start + 2]) {
      const events = decodeInPieces(line, [cut]);
      assert.deepEqual(events, [{ type: "delta", text: "好" }], `cut inside the character at byte ${cut}`);
    }
  });

  test("every possible cut point, and byte-by-byte feeding, give the same events", () => {
    for (let cut = 0; cut <= NDJSON_BYTES.length; cut++) {
      assert.deepEqual(decodeInPieces(NDJSON_BYTES, [cut]), STREAM, `cut at byte ${cut}`);
    }
    const everyByte = Array.from({ length: NDJSON_BYTES.length - 1 }, (_, i) => i + 1);
    assert.deepEqual(decodeInPieces(NDJSON_BYTES, everyByte), STREAM);
  });

  test("a four-byte character (outside the BMP) split three ways survives", () => {
    const line = encode('{"type":"delta","text":"𠀋"}\n');
    const start = line.indexOf(0xf0);
    const events = decodeInPieces(line, [start + 1, start + 2, start + 3]);
    assert.deepEqual(events, [{ type: "delta", text: "𠀋" }]);
  });

  test("flush() parses a last line without a newline; blank and CRLF lines are tolerated", () => {
    const decoder = new NdjsonDecoder();
    assert.deepEqual(decoder.push(encode('\n{"type":"ping"}\r\n\n{"type":"done"}')), [{ type: "ping" }]);
    assert.deepEqual(decoder.flush(), [{ type: "done" }]);
  });

  test("a line that is not JSON is a bad_response error", () => {
    const decoder = new NdjsonDecoder();
    assert.throws(() => decoder.push(encode("<html>\n")), (error) => {
      assert.ok(error instanceof LiuyiError);
      assert.equal(error.code, "bad_response");
      return true;
    });
  });
});

test("ndjsonEvents() reads a byte stream cut mid-line and mid-character", async () => {
  const cut = NDJSON_BYTES.indexOf(0xe5) + 1; // inside 我
  const body = chunked([NDJSON_BYTES.subarray(0, cut), NDJSON_BYTES.subarray(cut)]);
  const events = [];
  for await (const event of ndjsonEvents(body)) events.push(event);
  assert.deepEqual(events, STREAM);
});

test("parseRetryAfter() reads seconds and HTTP dates", () => {
  assert.equal(parseRetryAfter("3"), 3);
  assert.equal(parseRetryAfter(null), null);
  assert.equal(parseRetryAfter("soon"), null);
  const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
  assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:28:05 GMT", now), 5);
});

/** Run `fn` with globalThis.fetch replaced by `fake`; the requests it saw are returned. */
async function withFetch(fake, fn) {
  const original = globalThis.fetch;
  const seen = [];
  globalThis.fetch = async (url, init) => {
    seen.push({ url, init });
    return fake(url, init);
  };
  try {
    await fn();
  } finally {
    globalThis.fetch = original;
  }
  return seen;
}

async function collect(stream) {
  const events = [];
  for await (const event of stream) events.push(event);
  return events;
}

describe("translateStream", () => {
  test("posts JSON with the options and yields every event up to done", async () => {
    const cut = NDJSON_BYTES.indexOf(0xe5) + 2;
    const respond = () =>
      new Response(chunked([NDJSON_BYTES.subarray(0, cut), NDJSON_BYTES.subarray(cut)]), {
        headers: { "Content-Type": "application/x-ndjson" },
      });
    let events;
    const seen = await withFetch(respond, async () => {
      const options = { baseUrl: "http://h", source: "zh", target: "en", apiKey: "k", maxNewTokens: 9 };
      events = await collect(translateStream("我很好。", options));
    });
    assert.deepEqual(events, STREAM);
    assert.equal(seen[0].url, "http://h/v1/translate/stream");
    assert.equal(seen[0].init.method, "POST");
    assert.equal(seen[0].init.headers.Authorization, "Bearer k");
    assert.equal(seen[0].init.headers.Accept, "application/x-ndjson");
    const body = JSON.parse(seen[0].init.body);
    assert.deepEqual(body, { text: "我很好。", source: "zh", target: "en", max_new_tokens: 9 });
    assert.ok(seen[0].init.signal.aborted, "the request's own controller is aborted once the stream is over");
  });

  test("an HTTP error becomes a LiuyiError with status, code, retryAfter and details", async () => {
    const respond = () =>
      Response.json(
        { error: { code: "overloaded", message: "busy", retry_after: 1 } },
        { status: 503, headers: { "Retry-After": "2" } },
      );
    await withFetch(respond, async () => {
      await assert.rejects(collect(translateStream("x")), (error) => {
        assert.ok(error instanceof LiuyiError);
        assert.deepEqual(
          [error.status, error.code, error.message, error.retryAfter],
          [503, "overloaded", "busy", 2],
        );
        return true;
      });
    });
    const tooLong = () =>
      Response.json(
        { error: { code: "text_too_long", message: "too long", param: "text", limit: 20, length: 25 } },
        { status: 413 },
      );
    await withFetch(tooLong, async () => {
      await assert.rejects(collect(translateStream("x")), (error) => {
        assert.equal(error.code, "text_too_long");
        assert.deepEqual(error.details, { param: "text", limit: 20, length: 25 });
        assert.equal(error.retryAfter, null);
        return true;
      });
    });
  });

  test("a non-JSON error page still gives a LiuyiError", async () => {
    const respond = () =>
      new Response("<h1>Bad gateway</h1>", { status: 502, headers: { "Content-Type": "text/html" } });
    await withFetch(respond, async () => {
      const expected = { name: "LiuyiError", status: 502, code: "http_error" };
      await assert.rejects(collect(translateStream("x")), expected);
    });
  });

  test("a 200 that is not NDJSON is refused before reading", async () => {
    const respond = () => new Response("<html></html>", { headers: { "Content-Type": "text/html" } });
    await withFetch(respond, async () => {
      await assert.rejects(collect(translateStream("x")), { code: "bad_response" });
    });
  });

  test("a stream that ends without done or error is an incomplete_stream error", async () => {
    const respond = () =>
      new Response(chunked([encode('{"type":"start"}\n{"type":"delta","text":"I"}\n')]), {
        headers: { "Content-Type": "application/x-ndjson" },
      });
    await withFetch(respond, async () => {
      await assert.rejects(collect(translateStream("x")), { code: "incomplete_stream" });
    });
  });

  test("no connection is a network_error", async () => {
    const respond = () => Promise.reject(new TypeError("fetch failed"));
    await withFetch(respond, async () => {
      await assert.rejects(collect(translateStream("x")), { code: "network_error", status: 0 });
    });
  });

  test("aborting the caller's signal aborts the request and stops the generator", async () => {
    const caller = new AbortController();
    let requestSignal;
    const respond = (url, init) => {
      requestSignal = init.signal;
      // A body that sends `start` and then nothing until it is cancelled.
      return new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(encode('{"type":"start"}\n'));
            init.signal.addEventListener("abort", () => controller.error(init.signal.reason));
          },
        }),
        { headers: { "Content-Type": "application/x-ndjson" } },
      );
    };
    await withFetch(respond, async () => {
      const stream = translateStream("x", { signal: caller.signal });
      assert.deepEqual((await stream.next()).value, { type: "start" });
      const pending = stream.next();
      caller.abort();
      await assert.rejects(pending, { name: "AbortError" });
    });
    assert.ok(requestSignal.aborted);
  });
});
