package redisconn

import (
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		url  string
		read time.Duration
		db   int
	}{
		{"redis://127.0.0.1:6379/0", IOTimeout, 0},
		{"redis://127.0.0.1:6379/3?read_timeout=250ms", 250 * time.Millisecond, 3},
	}
	for _, tt := range tests {
		o, err := Options(tt.url)
		if err != nil {
			t.Fatalf("Options(%q): %v", tt.url, err)
		}
		if !o.ContextTimeoutEnabled || o.ReadTimeout != tt.read || o.WriteTimeout != IOTimeout || o.DialTimeout != DialTimeout ||
			o.PoolTimeout != PoolTimeout || o.MaxRetries != -1 || o.DB != tt.db {
			t.Errorf("Options(%q) = %+v", tt.url, o)
		}
	}
	if _, err := Options("http://not-redis"); err == nil {
		t.Error("Options accepted an http URL")
	}
}
