package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/jsonscan"
	"github.com/firstword/firstword/internal/wire/wiretest"
)

var eventSeeds = []string{
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The"}  }`,
	`{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "I need \u00d7 \"x\" \n"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Sa"}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Hé \"q\" \\ \n\t \u00e9 \ud83d\ude00 \ud800 x / \/"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":null,"signature":null,"Thinking":"x"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","SIGNATURE":"x"}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"a","signature":"s"}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwK"}}`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":120,"output_tokens_details":{"thinking_tokens":67}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x","start_char_index":0,"end_char_index":1.5e3,"ok":[true,false,null]}}}`,
	`{"type":"content_block_stop","index":0     }`,
	`{"type": "ping"}`,
	`{"type":"message_stop"       }`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":19}}`,
	`{"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	`{"Type":"content_block_delta","INDEX":3,"Delta":{"TEXT":"x"}}`,
	`{"type":"content_block_delta","index":1.5}`,
	`{"type":"content_block_delta","index":-0,"delta":null}`,
	`{"type":null,"index":null,"delta":{"type":null,"text":null,"partial_json":null}}`,
	`{"type":"content_block_delta","delta":{"text":"a"},"delta":{"type":"text_delta"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"text":5}}`,
	`{"type":"x"} trailing`,
	`{"type":"x","index":12345678901234567890}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\u00"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad \x escape"}}`,
	"{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\xff\"}}",
	"{\"t\xc3\xa9\":1,\"type\":\"ping\"}",
	`null`,
	`[]`,
}

func TestDecodeEventMatchesEncodingJSON(t *testing.T) {
	for _, s := range eventSeeds {
		compareDecoders(t, []byte(s))
	}
	for _, fx := range fixtures {
		b, _ := os.ReadFile("testdata/" + fx.file)
		for _, line := range strings.Split(string(b), "\n") {
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			compareDecoders(t, []byte(d))
			// The fast path, not the fallback, must handle real deltas.
			e := event{Index: noIndex}
			sc := eventScanner{jsonscan.New([]byte(d))}
			if strings.Contains(d, "content_block_delta") && sc.event(&e) != nil {
				t.Errorf("%s: a real delta took the slow path", d)
			}
		}
	}
}

// TestSymbolsPlain: StrOrNull matches its known names by their bytes,
// which only plain names allow.
func TestSymbolsPlain(t *testing.T) {
	for _, sym := range symbols {
		if !jsonscan.Plain(sym) {
			t.Errorf("symbol %q is not plain", sym)
		}
	}
}

func compareDecoders(t *testing.T, b []byte) {
	t.Helper()
	var fast event
	std := event{Index: noIndex}
	ferr := decodeEvent(b, &fast)
	serr := json.Unmarshal(b, &std)
	if (ferr == nil) != (serr == nil) {
		t.Fatalf("%s: fast error %v, encoding/json error %v", b, ferr, serr)
	}
	if serr != nil {
		return
	}
	if diff := cmp.Diff(std, fast); diff != "" {
		t.Fatalf("%s: decoders differ (-encoding/json +fast):\n%s", b, diff)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range eventSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		compareDecoders(t, b)
	})
}

// BenchmarkDecodeChunk measures the cost of one content_block_delta: the
// event decoder alone (fast and encoding/json), and the whole ReadStream
// path (SSE parsing, decoding, state, the chunk) per delta.
func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" current weather"}  }`)
	b.Run("decodeEvent", func(b *testing.B) {
		b.ReportAllocs()
		var e event
		for b.Loop() {
			decodeEvent(data, &e)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		var e event
		for b.Loop() {
			e = event{Index: noIndex}
			json.Unmarshal(data, &e)
		}
	})
	thinking := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" current weather"}  }`)
	b.Run("decodeEvent/thinking", func(b *testing.B) {
		b.ReportAllocs()
		var e event
		for b.Loop() {
			decodeEvent(thinking, &e)
		}
	})
	// A thinking stream costs what a text stream does per delta.
	for _, kind := range []struct{ name, block, delta, field string }{
		{"ReadStream", "text", "text_delta", "text"},
		{"ReadStream/thinking", "thinking", "thinking_delta", "thinking"},
	} {
		b.Run(kind.name, func(b *testing.B) {
			const deltas = 1000
			var buf bytes.Buffer
			buf.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n")
			fmt.Fprintf(&buf, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":%q,%q:\"\"}}\n\n", kind.block, kind.field)
			for i := range deltas {
				fmt.Fprintf(&buf, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":%q,%q:\" word%d\"}}\n\n", kind.delta, kind.field, i%10)
			}
			buf.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1000}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			wiretest.BenchmarkStream(b, buf.Bytes(), func(r io.Reader) chat.Stream { return pull(r, 0) })
		})
	}
}
