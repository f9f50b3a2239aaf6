package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
)

func checkString(t *testing.T, s string) {
	t.Helper()
	want, _ := json.Marshal(s)
	if got := AppendString(nil, s); string(got) != string(want) {
		t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	if got := AppendStringNoHTML(nil, s); string(got) != string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))) {
		t.Errorf("AppendStringNoHTML(%q) = %s, want %s", s, got, buf.Bytes())
	}
}

func TestAppendString(t *testing.T) {
	for c := range 256 {
		checkString(t, "a"+string(rune(c))+"b")
		checkString(t, "a"+string([]byte{byte(c)})+"b")
	}
	for _, s := range []string{"", "héllo", "\u2028\u2029", "<a href=\"x\">&</a>", "\xff\xfe", "tab\tnl\ncr\r\b\f\\"} {
		checkString(t, s)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("héllo <&> \u2028 \xff")
	f.Fuzz(checkString)
}
