package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// maxAnswerBytes bounds what the commands read of a gateway's answer (a
// usage report is the largest).
const maxAnswerBytes = 64 << 20

// gatewayClient calls a running gateway's HTTP API (keys, tenants,
// budget) with an API key.
type gatewayClient struct {
	base, key string
	hc        *http.Client
}

func newGatewayClient(base, key string, timeout time.Duration) *gatewayClient {
	return &gatewayClient{base: base, key: key, hc: &http.Client{Timeout: timeout}}
}

// answer is a gateway's answer: its status code and line, and its body.
type answer struct {
	code   int
	status string
	body   []byte
}

// errorMessage is the message of an answer in the API's error shape, or
// "".
func (a answer) errorMessage() string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(a.body, &e)
	return e.Error.Message
}

// send sends a request to path, with body as JSON unless it is nil and
// the key unless it is "", and reads the answer (its first
// maxAnswerBytes).
func (c *gatewayClient) send(ctx context.Context, method, path string, body []byte) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return answer{}, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	return answer{code: resp.StatusCode, status: resp.Status, body: b}, err
}
