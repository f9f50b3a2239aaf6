package openai

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"testing/iotest"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Quirks of servers that speak the Chat Completions stream, each proven on
// recorded or documented bytes (testdata/SOURCES.md says where each file
// comes from). Every row is fed whole, one byte at a time and at random
// splits, and must give exactly the same response.

const usageFixtureText = "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app."

var quirkRows = []struct {
	name string
	file string
	want *chat.Response
}{
	{
		// vLLM with stream_options.continuous_usage_stats: usage on every
		// chunk, growing; the last one is the total.
		name: "vllm continuous usage",
		file: "vllm_continuous_usage.sse",
		want: &chat.Response{
			Model:   "Qwen/Qwen2.5-1.5B-Instruct",
			Choices: []chat.Choice{{Text: "Bonjour à tous 👋!", FinishReason: chat.FinishStop}},
			Usage:   &chat.Usage{InputTokens: 12, OutputTokens: 5},
		},
	},
	{
		// Heartbeat comments between events and inside an event.
		name: "ping comments",
		file: "framing_ping.sse",
		want: &chat.Response{
			Model:   "gpt-4o-2024-08-06",
			Choices: []chat.Choice{{Text: usageFixtureText, FinishReason: chat.FinishStop}},
			Usage:   &chat.Usage{InputTokens: 14, OutputTokens: 30},
		},
	},
	{
		name: "crlf framing",
		file: "framing_crlf.sse",
		want: &chat.Response{
			Model:   "gpt-4o-2024-08-06",
			Choices: []chat.Choice{{Text: usageFixtureText, FinishReason: chat.FinishStop}},
			Usage:   &chat.Usage{InputTokens: 14, OutputTokens: 30},
		},
	},
	{
		name: "data without space",
		file: "framing_nospace.sse",
		want: &chat.Response{
			Model:   "gpt-4o-2024-08-06",
			Choices: []chat.Choice{{Text: usageFixtureText, FinishReason: chat.FinishStop}},
			Usage:   &chat.Usage{InputTokens: 14, OutputTokens: 30},
		},
	},
	{
		// Azure: a prompt_filter_results chunk with empty choices first,
		// annotation chunks without a delta, one of them after the finish.
		name: "azure async filter passes",
		file: "azure_async_filter_pass.sse",
		want: &chat.Response{
			Model:   "gpt-35-turbo",
			Choices: []chat.Choice{{Text: "Color is a", FinishReason: chat.FinishStop}},
		},
	},
	{
		// Azure: the filter stops the stream with finish_reason
		// content_filter on an annotation chunk.
		name: "azure async filter blocks",
		file: "azure_async_filter_blocked.sse",
		want: &chat.Response{
			Model:   "gpt-35-turbo",
			Choices: []chat.Choice{{Text: "Hey Jude, better", FinishReason: chat.FinishContentFilter}},
		},
	},
	{
		// A refusal streamed in delta.refusal, content null.
		name: "refusal",
		file: "openai_refusal.sse",
		want: &chat.Response{
			Model:   "gpt-4o-2024-08-06",
			Choices: []chat.Choice{{Refusal: "I'm sorry, but I can't assist with that request.", FinishReason: chat.FinishStop}},
			Usage:   &chat.Usage{InputTokens: 17, OutputTokens: 12},
		},
	},
	{
		// n=3, interleaved; the third choice refuses.
		name: "three choices",
		file: "openai_n3_refusal.sse",
		want: &chat.Response{
			Model: "gpt-4o-2024-08-06",
			Choices: []chat.Choice{
				{Index: 0, Text: `{"city":"San Francisco","temperature":63,"units":"f"}`, FinishReason: chat.FinishStop},
				{Index: 1, Text: `{"city":"San Francisco","temperature":58.6,"units":"f"}`, FinishReason: chat.FinishStop},
				{Index: 2, Refusal: "I'm sorry, but I can't accurately provide the current weather for San Francisco as my data is up to October 2023. You can try checking a reliable weather website or app for real-time updates.", FinishReason: chat.FinishStop},
			},
			Usage: &chat.Usage{InputTokens: 17, OutputTokens: 71},
		},
	},
}

// quirkReaders feeds raw whole, one byte at a time and at random splits.
func quirkReaders(raw []byte) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":   func() io.Reader { return bytes.NewReader(raw) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(raw)) },
		"random":  func() io.Reader { return &splitReader{b: raw, rng: rand.New(rand.NewPCG(7, 8))} },
	}
}

func TestReadStreamQuirkFiles(t *testing.T) {
	for _, tt := range quirkRows {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			for name, mk := range quirkReaders(raw) {
				got, err := chat.Collect(pull(mk(), 0))
				if err != nil {
					t.Fatalf("%s: Collect() error = %v", name, err)
				}
				// The model is checked on its own below: see
				// TestReadStreamModelAfterModellessFirstChunk.
				if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(chat.Response{}, "Model")); diff != "" {
					t.Errorf("%s: response (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// TestReadStreamModelOnFirstChunk checks the model reported for streams whose
// first chunk names it.
func TestReadStreamModelOnFirstChunk(t *testing.T) {
	for _, tt := range quirkRows {
		if tt.file == "azure_async_filter_pass.sse" || tt.file == "azure_async_filter_blocked.sse" {
			continue
		}
		raw, _ := os.ReadFile("testdata/" + tt.file)
		got, err := chat.Collect(pull(bytes.NewReader(raw), 0))
		if err != nil {
			t.Fatal(err)
		}
		if got.Model != tt.want.Model {
			t.Errorf("%s: model = %q, want %q", tt.name, got.Model, tt.want.Model)
		}
	}
}

// Azure's first chunk carries only prompt_filter_results, with "model":"".
// The reader reports the model of the first chunk only, so Azure streams
// report none.
func TestReadStreamModelAfterModellessFirstChunk(t *testing.T) {
	for _, file := range []string{"azure_async_filter_pass.sse", "azure_async_filter_blocked.sse"} {
		raw, _ := os.ReadFile("testdata/" + file)
		got, err := chat.Collect(pull(bytes.NewReader(raw), 0))
		if err != nil {
			t.Fatal(err)
		}
		if got.Model != "gpt-35-turbo" {
			t.Errorf("%s: model = %q, want %q", file, got.Model, "gpt-35-turbo")
		}
	}
}

// A stream that breaks after Azure's content_filter finish is reported as
// broken, not as filtered.
func TestReadStreamQuirkBrokenAfterFinish(t *testing.T) {
	for _, file := range []string{"azure_async_filter_blocked.sse", "vllm_continuous_usage.sse", "openai_n3_refusal.sse"} {
		raw, _ := os.ReadFile("testdata/" + file)
		cut := bytes.LastIndex(raw, []byte("data: [DONE]"))
		got, err := chat.Collect(pull(bytes.NewReader(raw[:cut]), 0))
		if ce := chat.AsError(err); ce == nil || ce.Category != chat.CategoryProtocol {
			t.Errorf("%s without [DONE]: error = %v, want a protocol error", file, err)
		}
		for _, ch := range got.Choices {
			if ch.FinishReason != "" {
				t.Errorf("%s without [DONE]: choice %d finished %q", file, ch.Index, ch.FinishReason)
			}
		}
	}
}
