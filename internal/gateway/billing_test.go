package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/metering"
)

// Billing: every upstream attempt that was sent is metered, apart from the
// answer, and usage the provider reported before its stream ended is kept.

// twoUpstreams is an alias over two OpenAI-compatible upstreams, "first"
// tried before "second", with prices for both and the given alias keys.
const twoUpstreams = `
providers:
  first: {type: %s, base_url: %s/v1}
  second: {type: openai, base_url: %s/v1}
prices:
  first/m1: {input: 1, output: 2}
  second/m2: {input: 3, output: 4}
models:
  chat:
%s    deployments:
      - {provider: first, model: m1}
      - {provider: second, model: m2, priority: 1}
`

func twoUpstreamGateway(t *testing.T, firstType string, first, second *gatewaytest.Upstream, aliasKeys string) *gatewaytest.Gateway {
	t.Helper()
	return gatewaytest.Start(t, gatewaytest.MustParse(t, fmt.Sprintf(twoUpstreams, firstType, first.URL, second.URL, aliasKeys)))
}

// answering is an upstream that answers at once: "Hello world", its usage,
// [DONE].
func answering(t *testing.T, in, out int) *gatewaytest.Upstream {
	return gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("Hello")+gatewaytest.ChunkJSON(" world")+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
			usageJSON(in, out)+"data: [DONE]\n\n")
	})
}

func usageJSON(in, out int) string {
	return fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out) + "\n\n"
}

// counting is an OpenAI-compatible chunk that shows nothing and is no
// progress (no text, no thinking: a thinking delta would win the hedge
// race) with the usage so far, as vLLM's continuous usage stats send.
func counting(in, out int) string {
	return fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out) + "\n\n"
}

// usageView waits for the local tenant's /v1/usage to show requests rows
// and returns its only row.
func usageView(t *testing.T, gw *gatewaytest.Gateway, requests int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, v := gatewaytest.GetJSON(t, gw.URL+"/v1/usage", "")
		data, _ := v["data"].([]any)
		if len(data) == 1 {
			row := data[0].(map[string]any)
			if n, _ := row["requests"].(float64); int(n) == requests {
				return row
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/v1/usage never showed %d requests: %v", requests, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recordJSON is a metering record as its JSON shows it.
func recordJSON(t *testing.T, rec metering.Record) map[string]any {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// checkView compares /v1/usage's row with want, number by number.
func checkView(t *testing.T, row map[string]any, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		if got := num(row[k]); !near(got, w) {
			t.Errorf("/v1/usage %s = %v, want %v (row %v)", k, row[k], w, row)
		}
	}
}

// A hedge that loses is metered: its provider reported 900 input tokens
// and 3 of output before the other answered. The answer's cost is the
// winner's alone; the view shows the two apart.
func TestBillingHedgeLoser(t *testing.T) {
	loser := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, counting(900, 1)+counting(900, 2)+counting(900, 3))
		<-r.Context().Done() // still preparing when it is cancelled
	})
	winner := answering(t, 12, 5)
	gw := twoUpstreamGateway(t, "openai", loser, winner, "    hedge: {enabled: true, delay: 150ms}\n")
	res := streamChat(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if res.text != "Hello world" || res.header["X-Firstword-Route"] != "first/m1=hedge_lost, second/m2=ok" {
		t.Fatalf("text %q, headers %v", res.text, res.header)
	}
	select {
	case <-loser.Closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the losing hedge was not cancelled")
	}
	answerCost := (12*3.0 + 5*4.0) / 1e6
	loserCost := (900*1.0 + 3*2.0) / 1e6
	rec := waitRecord(t, gw, res.id)
	if rec.Usage != (chat.Usage{InputTokens: 12, OutputTokens: 5}) || !near(rec.Cost, answerCost) {
		t.Errorf("the answer metered %+v costing %v, want the winner's 12 + 5 tokens costing %v", rec.Usage, rec.Cost, answerCost)
	}
	spent, _ := recordJSON(t, rec)["spent"].([]any)
	if len(spent) != 1 {
		t.Fatalf("attempts metered apart from the answer: %v, want the loser's", spent)
	}
	s := spent[0].(map[string]any)
	u, _ := s["usage"].(map[string]any)
	if s["deployment"] != "first/m1" || num(u["input_tokens"]) != 900 || num(u["output_tokens"]) != 3 || u["estimated"] == true || !near(num(s["cost"]), loserCost) {
		t.Errorf("the loser metered %v, want the 900 + 3 tokens its provider reported, costing %v", s, loserCost)
	}
	checkView(t, usageView(t, gw, 1), map[string]float64{
		"input_tokens": 12, "output_tokens": 5, "cost": answerCost,
		"attempts_input_tokens": 900, "attempts_output_tokens": 3, "attempts_cost": loserCost,
	})
}

// An attempt abandoned at its first-token timeout is metered: an estimate
// of its prompt when it said nothing, or the input its provider reported.
func TestBillingFirstTokenTimeoutFallback(t *testing.T) {
	const body = `{"model":"chat","stream":true,"messages":[{"role":"user","content":"what does a timed-out attempt cost?"}]}`
	estimate := chat.EstimateInputTokens(&chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "what does a timed-out attempt cost?"}}})
	for _, tc := range []struct {
		name, typ string
		silent    func(w http.ResponseWriter)
		in, out   int
	}{
		{"silent openai upstream", "openai", func(w http.ResponseWriter) {}, estimate, 0},
		{"anthropic upstream that reported its input", "anthropic", func(w http.ResponseWriter) {
			gatewaytest.SSEWrite(w, "event: message_start\ndata: "+`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m1","content":[],"stop_reason":null,"usage":{"input_tokens":1500,"output_tokens":1}}}`+"\n\n")
		}, 1500, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				gatewaytest.SSEHeaders(w)
				tc.silent(w)
				<-r.Context().Done()
			})
			gw := twoUpstreamGateway(t, tc.typ, first, answering(t, 12, 5), "    first_token_timeout: 200ms\n")
			res := streamChat(t, gw.URL, body)
			if res.text != "Hello world" || res.header["X-Firstword-Route"] != "first/m1=first_token_timeout, second/m2=ok" {
				t.Fatalf("text %q, headers %v", res.text, res.header)
			}
			rec := waitRecord(t, gw, res.id)
			if rec.Usage != (chat.Usage{InputTokens: 12, OutputTokens: 5}) {
				t.Errorf("the answer metered %+v, want the fallback's", rec.Usage)
			}
			checkView(t, usageView(t, gw, 1), map[string]float64{
				"input_tokens": 12, "output_tokens": 5, "cost": (12*3.0 + 5*4.0) / 1e6,
				"attempts_input_tokens": float64(tc.in), "attempts_output_tokens": float64(tc.out), "attempts_cost": float64(tc.in+2*tc.out) / 1e6,
			})
		})
	}
}

// An OpenAI-compatible stream whose body ends without [DONE] after its
// usage is metered with the upstream's counts; one that reported usage on
// every chunk keeps the last report and estimates only the text after it.
func TestBillingOpenAIUsageBeforeMissingDone(t *testing.T) {
	finish := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	textWithUsage := func(text string, in, out int) string {
		return fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, text, in, out, in+out) + "\n\n"
	}
	const after = " and then some more words"
	for _, tc := range []struct {
		name, stream string
		want         chat.Usage
	}{
		{"usage chunk, no [DONE]", gatewaytest.ChunkJSON("Hello") + gatewaytest.ChunkJSON(" world") + finish + usageJSON(31, 7),
			chat.Usage{InputTokens: 31, OutputTokens: 7}},
		{"usage on every chunk, cut", textWithUsage("Hello", 31, 1) + textWithUsage(" world", 31, 2) + gatewaytest.ChunkJSON(after),
			chat.Usage{InputTokens: 31, OutputTokens: 2 + chat.EstimateTokens(after), Estimated: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				gatewaytest.SSEHeaders(w)
				gatewaytest.SSEWrite(w, tc.stream) // and the body ends
			})
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig, up.URL)
			resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			rec := waitRecord(t, gw, resp.Header.Get("X-Request-Id"))
			if rec.Usage != tc.want {
				t.Errorf("metered %+v, want %+v (what the upstream reported)", rec.Usage, tc.want)
			}
			checkView(t, usageView(t, gw, 1), map[string]float64{"input_tokens": float64(tc.want.InputTokens), "output_tokens": float64(tc.want.OutputTokens)})
		})
	}
}

// An Anthropic stream the client cancels after some text is metered with
// the input tokens message_start reported; only its output is estimated.
func TestBillingAnthropicCancel(t *testing.T) {
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, "event: message_start\ndata: "+`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"usage":{"input_tokens":1234,"output_tokens":1}}}`+"\n\n"+
			"event: content_block_start\ndata: "+`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n")
		for _, text := range []string{"Hello", " there"} {
			gatewaytest.SSEWrite(w, "event: content_block_delta\ndata: "+`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+text+`"}}`+"\n\n")
		}
		<-r.Context().Done()
	})
	gw := gatewaytest.StartYAML(t, strings.ReplaceAll(anthropicUpstream, "claude-3-7-sonnet-20250219", "claude"), up.URL)
	c := dialRaw(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	c.readHeaders(t)
	id := c.hdr.Get("X-Request-Id")
	c.readUntil(t, "there", 1)
	c.conn.Close()
	rec := waitRecord(t, gw, id)
	if rec.Status != metering.StatusCancelled {
		t.Errorf("status %s, want cancelled", rec.Status)
	}
	// message_start's 1 output token, and the text after it, estimated.
	want := chat.Usage{InputTokens: 1234, OutputTokens: 1 + chat.EstimateTokens("Hello there"), Estimated: true}
	if rec.Usage != want {
		t.Errorf("metered %+v, want %+v: the input message_start reported", rec.Usage, want)
	}
	checkView(t, usageView(t, gw, 1), map[string]float64{"input_tokens": 1234})
}
