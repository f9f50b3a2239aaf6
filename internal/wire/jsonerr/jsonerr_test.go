package jsonerr

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestType(t *testing.T) {
	var dst struct {
		StreamOptions *struct {
			IncludeUsage *bool `json:"include_usage"`
		} `json:"stream_options"`
		MaxTokens int        `json:"max_tokens"`
		Temp      *float64   `json:"temperature"`
		Stop      []string   `json:"stop"`
		Tools     []struct{} `json:"tools"`
		Stream    bool       `json:"stream"`
		Name      string     `json:"name"`
	}
	for _, tc := range []struct{ in, want string }{
		{`{"stream_options":"yes"}`, "stream_options: expected object, got string"},
		{`{"max_tokens":10.5}`, "max_tokens: expected integer, got number 10.5"},
		{`{"max_tokens":"10"}`, "max_tokens: expected integer, got string"},
		{`{"temperature":"hot"}`, "temperature: expected number, got string"},
		{`{"stop":5}`, "stop: expected array, got number"},
		{`{"tools":[1]}`, "tools: expected object, got number"},
		{`{"stream":"yes"}`, "stream: expected boolean, got string"},
		{`{"name":{}}`, "name: expected string, got object"},
		{`{"stream_options":{"include_usage":1}}`, "stream_options.include_usage: expected boolean, got number"},
	} {
		err := Type(json.Unmarshal([]byte(tc.in), &dst))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
	}
	other := errors.New("x")
	if Type(other) != other || Type(nil) != nil {
		t.Error("other errors must pass through")
	}
}
