package bench

import (
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// sseServer writes body in pieces of n bytes, flushing each, so that a
// parser sees events split across reads.
func sseServer(body []byte, n int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for len(body) > 0 {
			k := min(n, len(body))
			w.Write(body[:k])
			rc.Flush()
			body = body[k:]
		}
	}))
}

func parsingProxy(t *testing.T, parser, upstream string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	if rp.ModifyResponse, err = ParseResponses(parser); err != nil {
		t.Fatal(err)
	}
	rp.ErrorLog = log.New(io.Discard, "", 0) // a broken stream is a test case here
	return httptest.NewServer(rp)
}

func TestParsingProxyPassesStreamsUnchanged(t *testing.T) {
	fixtures := []string{"openai_chat_stream_usage.sse", "framing_crlf.sse", "openai_chat_stream_toolcall.sse"}
	for _, parser := range Parsers {
		for _, name := range fixtures {
			t.Run(parser+"/"+name, func(t *testing.T) {
				body, err := os.ReadFile(filepath.Join("..", "wire", "openai", "testdata", name))
				if err != nil {
					t.Fatal(err)
				}
				up := sseServer(body, 37)
				defer up.Close()
				px := parsingProxy(t, parser, up.URL)
				defer px.Close()
				resp, err := http.Get(px.URL)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("reading the proxied stream: %v", err)
				}
				if !bytes.Equal(got, body) {
					t.Errorf("proxied stream differs from the upstream's:\ngot  %q\nwant %q", got, body)
				}
			})
		}
	}
}

// TestParsingProxyParses shows that each parser reads the events: a data
// line that is not JSON ends the response there, where a proxy that
// parses nothing would pass it on.
func TestParsingProxyParses(t *testing.T) {
	events := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\"\n\n"
	for _, parser := range Parsers {
		t.Run(parser, func(t *testing.T) {
			// The end comes only after the proxy gave up on the stream,
			// so that no parser can have read it with the broken event.
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				rc := http.NewResponseController(w)
				io.WriteString(w, events)
				rc.Flush()
				<-r.Context().Done()
				io.WriteString(w, "data: [DONE]\n\n")
				rc.Flush()
			}))
			defer up.Close()
			px := parsingProxy(t, parser, up.URL)
			defer px.Close()
			// A proxy that parsed nothing would pass the broken event on
			// and wait with the upstream: the client's timeout says so.
			c := &http.Client{Timeout: 10 * time.Second}
			resp, err := c.Get(px.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			var ne net.Error
			switch {
			case err == nil:
				t.Errorf("the stream with a broken event read whole (%q); want it cut", got)
			case errors.As(err, &ne) && ne.Timeout():
				t.Errorf("the proxy did not stop at the broken event: %v", err)
			}
			if bytes.Contains(got, []byte("[DONE]")) {
				t.Errorf("the proxy passed on what follows a broken event: %q", got)
			}
		})
	}
}

func TestParseResponsesUnknownParser(t *testing.T) {
	if _, err := ParseResponses("sonic"); err == nil {
		t.Error("ParseResponses(\"sonic\") gave no error")
	}
}
