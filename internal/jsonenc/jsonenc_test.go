package jsonenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
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

// checkFloat compares AppendFloat with encoding/json for f: the same bytes
// for every finite float64. NaN and the infinities, which encoding/json
// refuses (an *json.UnsupportedValueError), AppendFloat writes as 0, so
// that its output is always JSON; a caller that must refuse them checks
// first (the fast request encoder leaves such a request to
// encoding/json, which reports the error).
func checkFloat(t *testing.T, f float64) {
	t.Helper()
	got := string(AppendFloat([]byte("x"), f))
	want, err := json.Marshal(f)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		var unsupported *json.UnsupportedValueError
		if !errors.As(err, &unsupported) {
			t.Errorf("json.Marshal(%v) error = %v, want an UnsupportedValueError", f, err)
		}
		if got != "x0" {
			t.Errorf("AppendFloat(%v) = %s, want 0", f, got[1:])
		}
		return
	}
	if err != nil || got != "x"+string(want) {
		t.Errorf("AppendFloat(%v) = %s, want %s (%v)", f, got[1:], want, err)
	}
}

var floatTests = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 0.7, 1.5, -2.25, 100, 1e6, 123456789,
	// Where encoding/json switches to an exponent: below 1e-6 and from
	// 1e21, with e-07 written e-7.
	1e-6, math.Nextafter(1e-6, 0), 1e-7, -1e-7, 2.5e-8, 1e-9, 1e-10, 1.234e-100,
	1e20, math.Nextafter(1e21, 0), 1e21, -1e21, 1.5e21, 1e22, 1e100, 1e300,
	math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
	0x1p-1022, 0x1p-1074 * 3, 9007199254740993, 1 << 53, math.MaxInt64, 1.0 / 3,
	math.NaN(), math.Inf(1), math.Inf(-1),
}

func TestAppendFloat(t *testing.T) {
	for _, f := range floatTests {
		checkFloat(t, f)
	}
	for e := -330; e <= 310; e++ {
		checkFloat(t, math.Pow10(e))
		checkFloat(t, -3*math.Pow10(e))
	}
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range floatTests {
		f.Add(math.Float64bits(v))
	}
	// Every bit pattern: subnormals, NaN payloads, both zeros.
	f.Fuzz(func(t *testing.T, bits uint64) { checkFloat(t, math.Float64frombits(bits)) })
}
