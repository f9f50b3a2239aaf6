package store

import (
	"strings"
	"testing"
)

func TestNewID(t *testing.T) {
	a, b := NewID("msg_"), NewID("msg_")
	if !strings.HasPrefix(a, "msg_") || len(a) != len("msg_")+20 || a == b || strings.Trim(a[4:], "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		t.Errorf("NewID = %q, %q; want two different msg_ and 20 characters of [0-9a-z]", a, b)
	}
}
