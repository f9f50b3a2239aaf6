package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/simspec"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// Handler serves the sim as an OpenAI-compatible API on a real socket:
// POST /v1/chat/completions (streaming and not), GET /v1/models, and
// GET /sim/stats. Directives come from the X-Firstword-Sim header or a
// [sim ...] tag in the last user message. It is the fake upstream that
// tests and benchmarks put behind the gateway.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", p.serveChat)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		type model struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
		}
		var data []model
		for name := range simspec.Tiers {
			data = append(data, model{ID: name, Object: "model", OwnedBy: "sim"})
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	})
	mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, p.Stats())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *chat.Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	status := e.Status
	if status == 0 {
		status = e.HTTPStatus()
	}
	writeJSON(w, status, map[string]any{"error": wire.ErrorFromChat(e)})
}

func (p *Provider) serveChat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
	if err != nil {
		writeError(w, &chat.Error{Category: chat.CategoryInvalidRequest, Message: err.Error()})
		return
	}
	pr, err := wire.ParseRequest(body)
	if err != nil {
		writeError(w, &chat.Error{Category: chat.CategoryInvalidRequest, Message: err.Error()})
		return
	}
	req := pr.Request
	req.Hints.Sim = r.Header.Get("X-Firstword-Sim")
	ctx := r.Context()
	if !pr.Stream {
		resp, err := chat.Collect(p.Stream(ctx, req))
		if err != nil {
			writeError(w, chat.AsError(err))
			return
		}
		writeJSON(w, http.StatusOK, wire.EncodeCompletion(fmt.Sprintf("chatcmpl-sim%d", p.seq.Load()), time.Now().Unix(), req.Model, resp))
		return
	}
	rc := http.NewResponseController(w)
	enc := wire.ChunkEncoder{ID: fmt.Sprintf("chatcmpl-sim%d", p.seq.Load()+1), Created: time.Now().Unix(), Model: req.Model, IncludeUsage: pr.IncludeUsage}
	var buf []byte
	committed := false
	var usage *chat.Usage
	for ch, err := range p.Stream(ctx, req) {
		if err != nil {
			ce := chat.AsError(err)
			if !committed {
				writeError(w, ce)
				return
			}
			if ce.Category == chat.CategoryProtocol {
				// Truncation: end the response without [DONE].
				return
			}
			w.Write(wire.AppendErrorEvent(buf[:0], wire.ErrorFromChat(ce)))
			rc.Flush()
			return
		}
		if !committed {
			committed = true
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		buf = enc.AppendChunk(buf[:0], &ch)
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
	if !committed {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
	buf = buf[:0]
	if pr.IncludeUsage && usage != nil {
		buf = enc.AppendUsage(buf, usage)
	}
	buf = wire.AppendDone(buf)
	w.Write(buf)
	rc.Flush()
}
