package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/firstword/firstword/internal/wire/openai"
)

// Parsers are the ways bench-proxy --parse can read each event of a Chat
// Completions stream on its way, unchanged, to the client: with
// httputil.ReverseProxy, the least a gateway that meters a stream and sees
// its errors must do, and the baseline that parsing sets.
var Parsers = []string{"firstword", "stdlib"}

// ParseResponses returns a ReverseProxy.ModifyResponse that passes every
// event stream through the named parser: "firstword" is the gateway's own
// Chat Completions reader (SSE framing, JSON, usage); "stdlib" is the
// textbook Go reader, bufio lines and encoding/json into a struct.
func ParseResponses(parser string) (func(*http.Response) error, error) {
	var open func(io.Reader) eventParser
	switch parser {
	case "firstword":
		open = func(r io.Reader) eventParser { return firstwordParser{openai.NewStreamReader(r, 0)} }
	case "stdlib":
		open = func(r io.Reader) eventParser { return &stdlibParser{br: bufio.NewReader(r)} }
	default:
		return nil, fmt.Errorf("unknown parser %q (want %s)", parser, strings.Join(Parsers, " or "))
	}
	return func(r *http.Response) error {
		if r.StatusCode == http.StatusOK && strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
			p := &parsedBody{body: r.Body}
			p.parser = open(io.TeeReader(r.Body, &p.pending))
			r.Body = p
		}
		return nil
	}, nil
}

// eventParser reads one event (or chunk) per call to next.
type eventParser interface {
	next() error
	Release()
}

type firstwordParser struct{ *openai.StreamReader }

func (p firstwordParser) next() error {
	_, err := p.Next()
	return err
}

// parsedBody returns the upstream's bytes as its parser consumed them:
// each Read parses until the parser has read something new.
type parsedBody struct {
	body    io.ReadCloser
	parser  eventParser
	pending bytes.Buffer // read by the parser, not yet returned
	err     error
}

func (p *parsedBody) Read(b []byte) (int, error) {
	for p.pending.Len() == 0 {
		if p.err != nil {
			return 0, p.err
		}
		p.err = p.parser.next()
	}
	return p.pending.Read(b)
}

func (p *parsedBody) Close() error {
	p.parser.Release()
	return p.body.Close()
}

// stdlibParser reads data lines with bufio and decodes each with
// encoding/json, as most Go code that reads a Chat Completions stream
// does.
type stdlibParser struct {
	br    *bufio.Reader
	chunk stdlibChunk
	// Text and Usage are what a meter keeps.
	Text  int
	Usage stdlibUsage
}

type stdlibChunk struct {
	Choices []struct {
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *stdlibUsage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type stdlibUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

func (p *stdlibParser) next() error {
	for {
		line, err := p.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			return nil
		}
		p.chunk = stdlibChunk{}
		if err := json.Unmarshal(data, &p.chunk); err != nil {
			return err
		}
		for _, c := range p.chunk.Choices {
			p.Text += len(c.Delta.Content)
		}
		if p.chunk.Usage != nil {
			p.Usage = *p.chunk.Usage
		}
		return nil
	}
}

func (p *stdlibParser) Release() {}
