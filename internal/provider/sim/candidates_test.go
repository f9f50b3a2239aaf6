package sim_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

// TestCandidates: two choices, streamed as Gemini candidates and Chat
// Completions choices, each read whole by its adapter.
func TestCandidates(t *testing.T) {
	srv := serve(t, 2)
	for _, a := range adapters {
		if a.name != "gemini" && a.name != "chat completions" {
			continue
		}
		req := userReq("reasoner", "two? [sim ttft=1ms gap=1ms tokens=6 think=5ms think_tps=1000]")
		req.N = 2
		got, err := chat.Collect(a.new(srv.URL, &http.Client{}).Stream(context.Background(), req))
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		if len(got.Choices) != 2 || got.Choices[0].Text == "" || got.Choices[1].Text == "" || got.Choices[1].FinishReason != chat.FinishStop || got.Usage == nil {
			t.Errorf("%s: %+v, want two finished choices and the usage", a.name, got)
		}
	}
}
