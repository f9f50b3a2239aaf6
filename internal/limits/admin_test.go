package limits

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/store"
)

// fakeAdmin is a store as the admin operations see it.
type fakeAdmin struct {
	fakeSource
	keys    []store.APIKey
	deleted []string
	rows    []store.UsageRow
}

func (f *fakeAdmin) PutLimitOverride(_ context.Context, o *store.LimitOverride) error {
	if f.err != nil {
		return f.err
	}
	for i := range f.ovs {
		if f.ovs[i].Scope == o.Scope && f.ovs[i].SubjectID == o.SubjectID {
			f.ovs[i] = *o
			return nil
		}
	}
	f.ovs = append(f.ovs, *o)
	return nil
}

func (f *fakeAdmin) DeleteLimitOverride(_ context.Context, scope, id string) error {
	for i, o := range f.ovs {
		if o.Scope == scope && o.SubjectID == id {
			f.ovs = append(f.ovs[:i], f.ovs[i+1:]...)
			f.deleted = append(f.deleted, scope+":"+id)
			return nil
		}
	}
	return store.ErrNotFound
}

func (f *fakeAdmin) ListAPIKeys(context.Context, string) ([]store.APIKey, error) {
	return f.keys, f.err
}

func (f *fakeAdmin) UsageReport(context.Context, store.UsageFilter) ([]store.UsageRow, error) {
	return f.rows, f.err
}

func TestParseWhen(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Time
		wantErr string
	}{
		{"", time.Time{}, ""},
		{"2026-12-01", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), ""},
		{"2026-12-01T10:00:00Z", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), ""},
		{"yesterday", time.Time{}, `want YYYY-MM-DD or an RFC 3339 time, got "yesterday"`},
	} {
		got, err := ParseWhen(tc.in)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("ParseWhen(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseWhen(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseChange(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		field     string // of the *ChangeError
		wantError string
	}{
		{"a field", `{"requests_per_minute": 7}`, "", ""},
		{"reset", `{"reset": true}`, "", ""},
		{"unknown field", `{"rpm": 7}`, "", `json: unknown field "rpm"`},
		{"trailing data", `{} {}`, "", "unexpected data after the JSON value"},
		{"negative", `{"usd_per_day": -1}`, "usd_per_day", "usd_per_day must not be negative (0 is no cap)"},
	} {
		_, err := ParseChange([]byte(tc.in))
		if tc.wantError == "" {
			if err != nil {
				t.Errorf("%s: ParseChange(%s) = %v, want no error", tc.name, tc.in, err)
			}
			continue
		}
		var ce *ChangeError
		if !errors.As(err, &ce) || ce.Field != tc.field || err.Error() != tc.wantError {
			t.Errorf("%s: ParseChange(%s) = %v, want a *ChangeError of field %q saying %q", tc.name, tc.in, err, tc.field, tc.wantError)
		}
	}
}

// TestSetOverride: a change merges into the stored override, reset
// drops it first, an empty result is deleted, and a key's change needs
// the key.
func TestSetOverride(t *testing.T) {
	ctx := context.Background()
	st := &fakeAdmin{keys: []store.APIKey{{ID: "key_1"}}}
	st.ovs = []store.LimitOverride{{Scope: store.ScopeTenant, SubjectID: "acme", Settings: []byte(`{"requests_per_minute": 5}`)}}
	n := func(v int) *int { return &v }
	got, err := SetOverride(ctx, st, store.ScopeTenant, "acme", []byte(`{"concurrent_streams": 2}`))
	if want := (Override{RequestsPerMinute: n(5), ConcurrentStreams: n(2)}); err != nil || !cmp.Equal(got, want) {
		t.Errorf("merge: %+v, %v; want %+v", got, err, want)
	}
	got, err = SetOverride(ctx, st, store.ScopeTenant, "acme", []byte(`{"reset": true, "tokens_per_minute": 9}`))
	if want := (Override{TokensPerMinute: n(9)}); err != nil || !cmp.Equal(got, want) {
		t.Errorf("reset: %+v, %v; want %+v", got, err, want)
	}
	if ov, _ := ParseOverride(st.ovs[0].Settings); !cmp.Equal(ov, Override{TokensPerMinute: n(9)}) {
		t.Errorf("stored %s, want the reset override", st.ovs[0].Settings)
	}
	if _, err := SetOverride(ctx, st, store.ScopeTenant, "acme", []byte(`{"reset": true}`)); err != nil || len(st.ovs) != 0 || len(st.deleted) != 1 {
		t.Errorf("reset to nothing: %v; overrides %+v, deleted %v; want it deleted", err, st.ovs, st.deleted)
	}
	if _, err := SetOverride(ctx, st, store.ScopeKey, "key_2", []byte(`{}`)); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("an unknown key: %v, want ErrUnknownKey", err)
	}
	if _, err := SetOverride(ctx, st, store.ScopeKey, "key_1", []byte(`{"requests_per_minute": 1}`)); err != nil || len(st.ovs) != 1 || st.ovs[0].Scope != store.ScopeKey {
		t.Errorf("a key: %v, %+v", err, st.ovs)
	}
	st.err = errors.New("down")
	var se *StoreError
	if _, err := SetOverride(ctx, st, store.ScopeTenant, "acme", []byte(`{}`)); !errors.As(err, &se) || se.Op != "reading limit overrides" {
		t.Errorf("the store down: %v, want a *StoreError reading limit overrides", err)
	}
}

// TestViews: a tenant is listed for its config policy, its override or
// its spend, and its budget state follows its spend against its caps.
func TestViews(t *testing.T) {
	today := time.Now().UTC().Format("2006-01-02")
	src := &fakeSource{
		ovs: []store.LimitOverride{{Scope: store.ScopeTenant, SubjectID: "globex", Settings: []byte(`{"usd_per_day": 1}`)}},
		spend: []store.SpendSum{
			{TenantID: "globex", KeyID: "k1", Day: today, Cost: 0.9, Tokens: 90},
			{TenantID: "initech", KeyID: "k2", Day: today, Cost: 2, Tokens: 200},
		},
	}
	l, _ := newTest(t, Options{Source: src, Tenants: map[string]Policy{"acme": {Budget: Budget{TokensPerDay: 10}}}})
	ctx := context.Background()
	views, err := TenantViews(ctx, src, l)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range views {
		ids = append(ids, v.ID)
	}
	if want := []string{"acme", "globex", "initech"}; !cmp.Equal(ids, want) {
		t.Errorf("tenants %v, want %v", ids, want)
	}
	v, err := ViewOf(ctx, src, l, store.ScopeTenant, "globex")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"usd_per_day": "soft"}; v.Spend.USDDay != 0.9 || v.Spend.TokensMonth != 90 || !cmp.Equal(v.Budget, want) {
		t.Errorf("globex: spend %+v, budget %v; want 0.9 USD, 90 tokens and %v", v.Spend, v.Budget, want)
	}
	if v, _ := ViewOf(ctx, src, l, store.ScopeKey, "k2"); v.Spend.USDMonth != 2 || len(v.Budget) != 0 {
		t.Errorf("key k2: spend %+v, budget %v; want 2 USD and no caps", v.Spend, v.Budget)
	}
	if v, _ := ViewOf(ctx, src, l, store.ScopeTenant, "acme"); !cmp.Equal(v.Budget, map[string]string{"tokens_per_day": "ok"}) {
		t.Errorf("acme: budget %v, want tokens_per_day ok", v.Budget)
	}
	src.err = errors.New("down")
	var se *StoreError
	if _, err := TenantViews(ctx, src, l); !errors.As(err, &se) || se.Op != "reading spend" {
		t.Errorf("the store down: %v, want a *StoreError reading spend", err)
	}
}

func TestUsageIsAList(t *testing.T) {
	rows, err := Usage(context.Background(), &fakeAdmin{}, store.UsageFilter{})
	if err != nil || rows == nil {
		t.Errorf("Usage with no rows = %#v, %v; want an empty list", rows, err)
	}
}
