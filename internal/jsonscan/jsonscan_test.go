package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// value decodes the next value into what encoding/json gives an any
// (map[string]any, []any, string, float64, bool, nil), with every method
// a decoder uses.
func value(s *Scanner, depth int) (any, error) {
	if depth >= maxDepth {
		return nil, ErrUnhandled
	}
	switch s.peek() {
	case '{':
		m := map[string]any{}
		err := s.Object(func(key []byte) error {
			v, err := value(s, depth+1)
			// encoding/json replaces each byte of invalid UTF-8 in a
			// key with U+FFFD, as converting to []rune does.
			m[string([]rune(string(key)))] = v
			return err
		})
		return m, err
	case '[':
		a := []any{}
		err := s.Array(func() error {
			v, err := value(s, depth+1)
			a = append(a, v)
			return err
		})
		return a, err
	case '"':
		var v string
		err := s.StrOrNull(&v, "type", "text_delta", "")
		return v, err
	case 't', 'f':
		var b bool
		err := s.Bool(&b)
		return b, err
	case 'n':
		if s.Null() {
			return nil, nil
		}
		return nil, ErrUnhandled
	}
	var f float64
	err := s.Float(&f)
	return f, err
}

// scanTests are inputs the scanner decodes (ok) or declines; every one is
// also checked against encoding/json by checkScanner.
var scanTests = []struct {
	name string
	in   string
	ok   bool
}{
	{"object", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The"}}`, true},
	{"white space", " \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } , \"c\" : [ ] }\n ", true},
	{"literals", `[true,false,null,"x",-0,0,1.5e-3,2E+10,-12]`, true},
	{"escapes", `["\"\\\/\b\f\n\r\t","\u00e9\u00E9","\ud83d\ude00","\ud800","\udc00x","\ud800\u0041","é日本"]`, true},
	{"invalid UTF-8 in a value", "[\"a\xffb\xc3\"]", true},
	{"non-ASCII key", "{\"t\xc3\xa9\":1,\"\xff\":2}", true},
	{"known names", `["type","text_delta","","a\\","\u0001","type\n"]`, true},
	{"duplicate keys", `{"a":1,"a":2}`, true},
	{"big number", `[1e308,123456789012345678901234567890]`, true},
	{"escaped key", `{"\u0074ype":"x"}`, false},
	{"escaped quote in a key", `{"a\"b":1}`, false},
	{"number out of range", `[1e400]`, false},
	{"trailing data", `{} {}`, false},
	{"trailing comma", `[1,]`, false},
	{"leading zero", `[01]`, false},
	{"bare fraction", `[.5]`, false},
	{"no digits after the point", `[1.]`, false},
	{"no exponent digits", `[1e]`, false},
	{"control character", "[\"a\x01\"]", false},
	{"bad escape", `["\x"]`, false},
	{"short unicode escape", `["\u12"]`, false},
	{"unterminated string", `["abc`, false},
	{"unterminated object", `{"a":1`, false},
	{"missing colon", `{"a" 1}`, false},
	{"bad literal", `[nul]`, false},
	{"literal run on", `[truex]`, false},
	{"single quotes", `['a']`, false},
	{"empty", ``, false},
	{"deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), false},
	// Values alone, for Int, Float, Bool and StrOrNull.
	{"integer", " -12 ", true},
	{"zero", "0", true},
	{"15 digits", "123456789012345", true},
	{"16 digits", "1234567890123456", true},
	{"fraction", "1.5", true},
	{"exponent", "1e2", true},
	{"minus alone", "-", false},
	{"null", "null", true},
	{"true", "true", true},
	{"string", `"s\u00e9"`, true},
}

func TestScanner(t *testing.T) {
	for _, tt := range scanTests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkScanner(t, []byte(tt.in)); got != tt.ok {
				t.Errorf("value(%q) accepted = %v, want %v", tt.in, got, tt.ok)
			}
		})
	}
}

func FuzzScanner(f *testing.F) {
	for _, tt := range scanTests {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkScanner(t, in) })
}

// deep reports whether in may nest past what Skip follows.
func deep(in []byte) bool {
	return bytes.Count(in, []byte("["))+bytes.Count(in, []byte("{")) > maxDepth
}

// checkScanner checks the scanner against encoding/json on in, and
// reports whether value decoded it: what the scanner accepts, encoding/json
// accepts, with the same value; what encoding/json refuses, the scanner
// refuses; valid JSON is declined only for an escaped key or deep nesting.
func checkScanner(t *testing.T, in []byte) bool {
	t.Helper()
	valid := json.Valid(in)

	s := New(in)
	if skipped := s.Skip() == nil && s.End(); skipped != valid && !deep(in) {
		t.Fatalf("Skip(%q) accepted = %v, json.Valid = %v", in, skipped, valid)
	}

	var want any
	werr := json.Unmarshal(in, &want)
	s = New(in)
	got, err := value(&s, 0)
	ok := err == nil && s.End()
	switch {
	case ok && werr != nil:
		t.Fatalf("value(%q) = %#v, encoding/json refuses it: %v", in, got, werr)
	case ok:
		// reflect.DeepEqual, not cmp: cmp's diff of nested slices takes
		// exponential time.
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("value(%q) = %#v, encoding/json: %#v", in, got, want)
		}
	case werr == nil:
		if !bytes.Contains(in, []byte(`\`)) && !deep(in) {
			t.Fatalf("value(%q) declined valid JSON without an escape", in)
		}
		// Written again, its keys with no escape where none is needed,
		// it is decoded.
		var canon bytes.Buffer
		enc := json.NewEncoder(&canon)
		enc.SetEscapeHTML(false)
		if enc.Encode(want) == nil && plainKeys(want) && !deep(canon.Bytes()) {
			s = New(canon.Bytes())
			if got, err := value(&s, 0); err != nil || !s.End() || !reflect.DeepEqual(want, got) {
				t.Fatalf("value(%q) = %#v, %v; want %#v", canon.Bytes(), got, err, want)
			}
		}
	}

	// Other skips what it does not decline; it declines keys that fold
	// to its names.
	s = New(in)
	err = s.Object(func(key []byte) error { return s.Other(key, "type", "k") })
	if err == nil && s.End() && !valid {
		t.Fatalf("Other skipped through %q, which is not JSON", in)
	}

	var decoded any
	s = New(in)
	if err := s.Decode(&decoded); (err == nil && s.End()) != (werr == nil) && !deep(in) {
		t.Fatalf("Decode(%q) = %v, encoding/json: %v", in, err, werr)
	}
	checkTyped(t, in)
	return ok
}

// plainKeys reports whether encoding/json writes every key in v without
// an escape.
func plainKeys(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.ContainsAny(k, "\"\\\u2028\u2029") || strings.IndexFunc(k, func(r rune) bool { return r < 0x20 }) >= 0 || !plainKeys(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !plainKeys(e) {
				return false
			}
		}
	}
	return true
}

// checkTyped checks the typed methods against encoding/json decoding in
// into the same type.
func checkTyped(t *testing.T, in []byte) {
	t.Helper()
	trimmed := bytes.TrimSpace(in)
	null := string(trimmed) == "null"

	var n, wn int
	s := New(in)
	nerr := s.Int(&n)
	if werr := json.Unmarshal(in, &wn); nerr == nil && s.End() {
		if werr != nil || n != wn {
			t.Fatalf("Int(%q) = %d, encoding/json: %d, %v", in, n, wn, werr)
		}
	} else if werr == nil && len(bytes.TrimPrefix(trimmed, []byte("-"))) <= 15 {
		t.Fatalf("Int(%q) declined what encoding/json decodes to %d", in, wn)
	}

	var f, wf float64
	s = New(in)
	ferr := s.Float(&f)
	werr := json.Unmarshal(in, &wf)
	if fok := ferr == nil && s.End(); fok != (werr == nil) || fok && f != wf {
		t.Fatalf("Float(%q) = %v, %v; encoding/json: %v, %v", in, f, ferr, wf, werr)
	}

	var b, wb bool
	s = New(in)
	berr := s.Bool(&b)
	werr = json.Unmarshal(in, &wb)
	if bok := berr == nil && s.End(); bok != (werr == nil) || bok && b != wb {
		t.Fatalf("Bool(%q) = %v, %v; encoding/json: %v, %v", in, b, berr, wb, werr)
	}

	var ws string
	werr = json.Unmarshal(in, &ws)
	s = New(in)
	str, serr := s.Str()
	if sok := serr == nil && s.End(); sok && (werr != nil || str != ws) || !sok && werr == nil && !null {
		t.Fatalf("Str(%q) = %q, %v; encoding/json: %q, %v", in, str, serr, ws, werr)
	}
	for _, known := range [][]string{nil, {"type", "ping", ""}} {
		var k string
		s = New(in)
		kerr := s.StrOrNull(&k, known...)
		if kok := kerr == nil && s.End(); kok != (werr == nil) || kok && k != ws {
			t.Fatalf("StrOrNull(%q, %q) = %q, %v; encoding/json: %q, %v", in, known, k, kerr, ws, werr)
		}
	}
}

func TestOther(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{`{}`, true},
		{`null`, true},
		{`{"a":1,"b":[{"c":"\u0041\n"}],"d":{"\u0074ype":{"x\"y":null}}}`, true},
		{`{"a":1,"TYPE":2}`, false},
		{"{\"\u212aey\":2}", false},
		{`{"\u0061":1}`, false}, // Object passes no escaped key
		{`{"a":[1,}`, false},
	} {
		s := New([]byte(tt.in))
		err := s.Object(func(key []byte) error { return s.Other(key, "type", "key") })
		if ok := err == nil && s.End(); ok != tt.ok {
			t.Errorf("Other over %s: accepted = %v, want %v", tt.in, ok, tt.ok)
		}
	}
}

func TestPlain(t *testing.T) {
	for _, v := range []string{"", "type", "gpt-4o-2024-08-06", "a b/c:{}[]~<&>\x7f"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
		if !Plain(v) || buf.String() != `"`+v+"\"\n" {
			t.Errorf("Plain(%q) = %v, encoding/json writes %s", v, Plain(v), buf.Bytes())
		}
	}
	for _, v := range []string{`a"b`, `a\`, "\x01", "tab\t", "é", "\xff", "a\u2028"} {
		if Plain(v) {
			t.Errorf("Plain(%q) = true", v)
		}
	}
}

func TestFoldMatch(t *testing.T) {
	for _, tt := range []struct {
		key  string
		want bool
	}{
		{"type", true}, {"TYPE", true}, {"Index", true},
		{"text", false}, {"typ", false}, {"types", false}, {"\u017ftop", false},
		{"", false}, {"iNDEX", true}, {"Tndex", false}, {"\x14ype", false}, {"4ype", false},
		// U+017F (ſ) folds to s and U+212A (K) to k, as encoding/json
		// matches them.
		{"\u017ftop_reason", true}, {"\u212aey", true},
	} {
		if got := FoldMatch([]byte(tt.key), "type", "index", "stop_reason", "key"); got != tt.want {
			t.Errorf("FoldMatch(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
	// What FoldMatch matches, encoding/json matches.
	for _, key := range []string{"TYPE", "\u017ftop_reason", "\u212aey"} {
		var v struct {
			Type       int `json:"type"`
			StopReason int `json:"stop_reason"`
			Key        int `json:"key"`
		}
		if err := json.Unmarshal([]byte(`{"`+key+`":1}`), &v); err != nil || v.Type+v.StopReason+v.Key != 1 {
			t.Errorf("encoding/json did not match %q: %+v, %v", key, v, err)
		}
	}
}

func BenchmarkScanner(b *testing.B) {
	in := []byte(`{"id":"chatcmpl-A","object":"chat.completion.chunk","created":1727346168,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":" weather"},"logprobs":null,"finish_reason":null}]}`)
	b.ReportAllocs()
	for b.Loop() {
		s := New(in)
		if s.Skip() != nil || !s.End() {
			b.Fatal("declined")
		}
	}
}
