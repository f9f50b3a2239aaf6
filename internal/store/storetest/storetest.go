// Package storetest is the conformance suite of store.Store. Every
// implementation runs Run from its tests and Bench from its benchmarks, so
// that they behave alike and their costs compare.
package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/firstword/firstword/internal/store"
)

// Run runs the conformance suite, as parallel subtests. open must return a
// new, empty store for each call and close it when t ends (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, s store.Store)
	}{
		{"Tenants", testTenants},
		{"APIKeys", testAPIKeys},
		{"Conversations", testConversations},
		{"ListConversations", testListConversations},
		{"DeleteConversation", testDeleteConversation},
		{"RenameConversation", testRenameConversation},
		{"TenantIsolation", testTenantIsolation},
		{"AddMessage", testAddMessage},
		{"ConcurrentAddMessage", testConcurrentAddMessage},
		{"AddMessagesTogether", testAddMessagesTogether},
		{"CheckpointMessage", testCheckpointMessage},
		{"FinishMessage", testFinishMessage},
		{"LastMessages", testLastMessages},
		{"InterruptStreaming", testInterruptStreaming},
		{"InterruptMessage", testInterruptMessage},
		{"UsageSummary", testUsageSummary},
		{"Timestamps", testTimestamps},
		{"LimitOverrides", testLimitOverrides},
		{"UsageSpendAndReport", testUsageSpendAndReport},
		{"IdempotencyKeys", testIdempotencyKeys},
		{"RevokeLater", testRevokeLater},
		{"ConcurrentIdempotencyClaims", testConcurrentIdempotencyClaims},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, open(t))
		})
	}
}

// t0 is the suite's clock: a whole microsecond, as every store keeps.
var t0 = time.Date(2025, 3, 14, 9, 26, 53, 589_793_000, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// seed creates the tenants acme and globex and, for each, the conversation
// "<tenant>-c1" of user alice.
func seed(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	for _, id := range []string{"acme", "globex"} {
		if err := s.CreateTenant(ctx, &store.Tenant{ID: id, Name: id + " inc", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		c := &store.Conversation{ID: id + "-c1", TenantID: id, UserID: "alice", Title: "hello",
			Model: "fast", CreatedAt: t0, UpdatedAt: t0}
		if err := s.CreateConversation(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// add appends a message and returns it as stored.
func add(t *testing.T, s store.Store, m store.Message) store.Message {
	t.Helper()
	if err := s.AddMessages(t.Context(), &m); err != nil {
		t.Fatalf("AddMessage(%s) = %v", m.ID, err)
	}
	return m
}

func userMsg(id, conv, tenant, content string, created time.Time) store.Message {
	return store.Message{ID: id, ConversationID: conv, TenantID: tenant, Role: "user",
		Content: content, Status: store.StatusComplete, CreatedAt: created, UpdatedAt: created}
}

func streamingMsg(id, conv, tenant string, created time.Time) store.Message {
	return store.Message{ID: id, ConversationID: conv, TenantID: tenant, Role: "assistant",
		Status: store.StatusStreaming, Model: "fast", CreatedAt: created, UpdatedAt: created}
}

func messages(t *testing.T, s store.Store, tenant, conv string) []store.Message {
	t.Helper()
	ms, err := s.ListMessages(t.Context(), tenant, conv)
	if err != nil {
		t.Fatalf("ListMessages(%s, %s) = %v", tenant, conv, err)
	}
	return ms
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s = %v, want ErrNotFound", what, err)
	}
}

func testTenants(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := &store.Tenant{ID: "acme", Name: "Acme Inc", CreatedAt: t0}
	if err := s.CreateTenant(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetTenant(acme) (-want +got):\n%s", diff)
	}
	_, err = s.GetTenant(ctx, "globex")
	wantNotFound(t, "GetTenant(globex)", err)
	if err := s.CreateTenant(ctx, &store.Tenant{ID: "acme", Name: "again"}); err == nil {
		t.Error("CreateTenant(acme) twice = nil, want an error")
	}
}

func testAPIKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	key := func(id, tenant, prefix string, created time.Time) store.APIKey {
		return store.APIKey{ID: id, TenantID: tenant, UserID: "alice", Name: "key " + id,
			Prefix: prefix, Hash: []byte("sha256-of-" + id), CreatedAt: created}
	}
	k1 := key("k1", "acme", "fw_aaaa", at(0))
	k2 := key("k2", "acme", "fw_bbbb", at(time.Minute))
	k3 := key("k3", "globex", "fw_cccc", at(2*time.Minute))
	k4 := key("k4", "globex", "fw_aaaa", at(3*time.Minute)) // prefixes may collide
	k4.Admin = true
	for _, k := range []*store.APIKey{&k1, &k2, &k3, &k4} {
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	byID := cmpopts.SortSlices(func(a, b store.APIKey) bool { return a.ID < b.ID })

	got, err := s.APIKeysByPrefix(ctx, "fw_aaaa")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.APIKey{k1, k4}, got, byID); diff != "" {
		t.Errorf("APIKeysByPrefix(fw_aaaa) (-want +got):\n%s", diff)
	}
	if got, err := s.APIKeysByPrefix(ctx, "fw_zzzz"); err != nil || len(got) != 0 {
		t.Errorf("APIKeysByPrefix(fw_zzzz) = %v, %v, want none", got, err)
	}

	for _, tc := range []struct {
		tenant string
		want   []store.APIKey
	}{
		{"acme", []store.APIKey{k2, k1}},
		{"globex", []store.APIKey{k4, k3}},
		{"", []store.APIKey{k4, k3, k2, k1}},
		{"initech", nil},
	} {
		got, err := s.ListAPIKeys(ctx, tc.tenant)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ListAPIKeys(%q) (-want +got):\n%s", tc.tenant, diff)
		}
	}

	count := func(want int) {
		t.Helper()
		if n, err := s.CountAPIKeys(ctx); err != nil || n != want {
			t.Errorf("CountAPIKeys() = %d, %v, want %d", n, err, want)
		}
	}
	count(4)
	revoked := at(time.Hour)
	if err := s.RevokeAPIKey(ctx, "k2", revoked); err != nil {
		t.Fatalf("RevokeAPIKey(k2) = %v", err)
	}
	count(4) // revoked keys still count
	if err := s.RevokeAPIKey(ctx, "fw_cccc", revoked); err != nil {
		t.Fatalf("RevokeAPIKey(fw_cccc) = %v", err)
	}
	count(4)
	wantNotFound(t, "RevokeAPIKey(nope)", s.RevokeAPIKey(ctx, "nope", revoked))
	count(4)

	k2.RevokedAt, k3.RevokedAt = &revoked, &revoked
	for _, want := range []store.APIKey{k2, k3} {
		got, err := s.APIKeysByPrefix(ctx, want.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]store.APIKey{want}, got); diff != "" {
			t.Errorf("APIKeysByPrefix(%s) after revoking (-want +got):\n%s", want.Prefix, diff)
		}
	}
}

func testConversations(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	want := &store.Conversation{ID: "c2", TenantID: "acme", UserID: "bob", Title: "Plans",
		Model: "smart", CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Second)}
	if err := s.CreateConversation(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetConversation(ctx, "acme", "c2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetConversation(acme, c2) (-want +got):\n%s", diff)
	}
	_, err = s.GetConversation(ctx, "acme", "nope")
	wantNotFound(t, "GetConversation(acme, nope)", err)
	if err := s.CreateConversation(ctx, &store.Conversation{ID: "c2", TenantID: "acme"}); err == nil {
		t.Error("CreateConversation(c2) twice = nil, want an error")
	}
}

func testListConversations(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s) // acme-c1: alice, updated t0
	for _, c := range []store.Conversation{
		{ID: "c2", UserID: "alice", UpdatedAt: at(time.Hour)},
		{ID: "c3", UserID: "bob", UpdatedAt: at(2 * time.Hour)},
		{ID: "c4", UserID: "alice", UpdatedAt: at(3 * time.Hour)},
	} {
		c.TenantID, c.CreatedAt = "acme", t0
		if err := s.CreateConversation(ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(tenant, user string, limit int) []string {
		t.Helper()
		cs, err := s.ListConversations(ctx, tenant, user, limit)
		if err != nil {
			t.Fatalf("ListConversations(%s, %q, %d) = %v", tenant, user, limit, err)
		}
		var ids []string
		for _, c := range cs {
			ids = append(ids, c.ID)
		}
		return ids
	}
	for _, tc := range []struct {
		name         string
		tenant, user string
		limit        int
		want         []string
	}{
		{"all", "acme", "", 10, []string{"c4", "c3", "c2", "acme-c1"}},
		{"limit", "acme", "", 2, []string{"c4", "c3"}},
		{"user", "acme", "alice", 10, []string{"c4", "c2", "acme-c1"}},
		{"user and limit", "acme", "alice", 1, []string{"c4"}},
		{"limit 0", "acme", "", 0, nil},
		{"other tenant", "globex", "", 10, []string{"globex-c1"}},
		{"no such user", "acme", "carol", 10, nil},
		{"no such tenant", "initech", "", 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(tc.tenant, tc.user, tc.limit), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListConversations(%s, %q, %d) (-want +got):\n%s", tc.tenant, tc.user, tc.limit, diff)
			}
		})
	}
	// A new message moves its conversation to the top.
	add(t, s, userMsg("m1", "c2", "acme", "hi", at(4*time.Hour)))
	if diff := cmp.Diff([]string{"c2", "c4"}, ids("acme", "", 2)); diff != "" {
		t.Errorf("ListConversations after AddMessage(c2) (-want +got):\n%s", diff)
	}
}

func testDeleteConversation(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	add(t, s, userMsg("m1", "acme-c1", "acme", "hi", at(time.Second)))
	add(t, s, streamingMsg("m2", "acme-c1", "acme", at(2*time.Second)))
	if err := s.DeleteConversation(ctx, "acme", "acme-c1"); err != nil {
		t.Fatalf("DeleteConversation = %v", err)
	}
	_, err := s.GetConversation(ctx, "acme", "acme-c1")
	wantNotFound(t, "GetConversation after delete", err)
	wantNotFound(t, "DeleteConversation twice", s.DeleteConversation(ctx, "acme", "acme-c1"))
	wantNotFound(t, "AddMessage after delete", s.AddMessages(ctx, new(userMsg("m3", "acme-c1", "acme", "hi", t0))))
	if n, err := s.InterruptStreaming(ctx, at(time.Hour), t0); err != nil || n != 0 {
		t.Errorf("InterruptStreaming after delete = %d, %v, want 0 (m2 deleted)", n, err)
	}
	// A conversation created again under the same ID starts empty: the old
	// messages are gone, not merely hidden.
	if err := s.CreateConversation(ctx, &store.Conversation{ID: "acme-c1", TenantID: "acme"}); err != nil {
		t.Fatal(err)
	}
	if ms := messages(t, s, "acme", "acme-c1"); len(ms) != 0 {
		t.Errorf("ListMessages of re-created conversation = %d messages, want 0", len(ms))
	}
	if m := add(t, s, userMsg("m1", "acme-c1", "acme", "hi", t0)); m.Seq != 1 {
		t.Errorf("first AddMessage of re-created conversation: Seq = %d, want 1", m.Seq)
	}
}

func testRenameConversation(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	add(t, s, userMsg("m1", "acme-c1", "acme", "hi", at(time.Second)))
	before, err := s.GetConversation(ctx, "acme", "acme-c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RenameConversation(ctx, "acme", "acme-c1", "Budgets, ‘measured’"); err != nil {
		t.Fatalf("RenameConversation = %v", err)
	}
	after, err := s.GetConversation(ctx, "acme", "acme-c1")
	if err != nil {
		t.Fatal(err)
	}
	if after.Title != "Budgets, ‘measured’" || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("after rename: title %q, updated %v; want the new title and updated_at unchanged (%v)", after.Title, after.UpdatedAt, before.UpdatedAt)
	}
	// A later message keeps the title the user chose.
	add(t, s, userMsg("m2", "acme-c1", "acme", "more", at(2*time.Second)))
	if c, err := s.GetConversation(ctx, "acme", "acme-c1"); err != nil || c.Title != "Budgets, ‘measured’" {
		t.Errorf("after another message: %+v, %v; want the chosen title", c, err)
	}
	wantNotFound(t, "RenameConversation of none", s.RenameConversation(ctx, "acme", "acme-none", "x"))
	wantNotFound(t, "RenameConversation of another tenant's", s.RenameConversation(ctx, "globex", "acme-c1", "x"))
	if c, err := s.GetConversation(ctx, "acme", "acme-c1"); err != nil || c.Title != "Budgets, ‘measured’" {
		t.Errorf("after another tenant's rename: %+v, %v; want it unchanged", c, err)
	}
}

func testTenantIsolation(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	m1 := add(t, s, userMsg("m1", "acme-c1", "acme", "secret", at(time.Second)))
	m2 := add(t, s, streamingMsg("m2", "acme-c1", "acme", at(2*time.Second)))
	conv, err := s.GetConversation(ctx, "acme", "acme-c1")
	if err != nil {
		t.Fatal(err)
	}

	// globex asks for acme's conversation acme-c1.
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"GetConversation", func() error { _, err := s.GetConversation(ctx, "globex", "acme-c1"); return err }},
		{"DeleteConversation", func() error { return s.DeleteConversation(ctx, "globex", "acme-c1") }},
		{"AddMessage", func() error {
			return s.AddMessages(ctx, new(userMsg("x1", "acme-c1", "globex", "injected", at(time.Hour))))
		}},
		{"AddMessage with acme's tenant on globex's conversation", func() error {
			return s.AddMessages(ctx, new(userMsg("x2", "globex-c1", "acme", "injected", at(time.Hour))))
		}},
		{"FinishMessage", func() error {
			m := m2
			m.TenantID, m.Status, m.Content = "globex", store.StatusComplete, "overwritten"
			return s.FinishMessage(ctx, &m)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantNotFound(t, tc.name, tc.op()) })
	}
	for _, tc := range []struct {
		name string
		list func() (int, error)
	}{
		{"ListMessages", func() (int, error) { ms, err := s.ListMessages(ctx, "globex", "acme-c1"); return len(ms), err }},
		{"LastMessages", func() (int, error) { ms, err := s.LastMessages(ctx, "globex", "acme-c1", 10); return len(ms), err }},
		{"ListConversations", func() (int, error) {
			cs, err := s.ListConversations(ctx, "globex", "", 10)
			for _, c := range cs {
				if c.TenantID != "globex" {
					return -1, fmt.Errorf("got %s's conversation %s", c.TenantID, c.ID)
				}
			}
			return 0, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n, err := tc.list(); n != 0 || err != nil {
				t.Errorf("%s = %d items, %v; want none, nil", tc.name, n, err)
			}
		})
	}

	// acme's data is untouched.
	got, err := s.GetConversation(ctx, "acme", "acme-c1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(conv, got); diff != "" {
		t.Errorf("acme's conversation changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]store.Message{m1, m2}, messages(t, s, "acme", "acme-c1")); diff != "" {
		t.Errorf("acme's messages changed (-want +got):\n%s", diff)
	}
	if ms := messages(t, s, "globex", "globex-c1"); len(ms) != 0 {
		t.Errorf("globex-c1 has %d messages, want 0", len(ms))
	}
}

func testAddMessage(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	want := []store.Message{
		userMsg("m1", "acme-c1", "acme", "What is 2+2?", at(time.Second)),
		{ID: "m2", ConversationID: "acme-c1", TenantID: "acme", Role: "assistant", Content: "4",
			Status: store.StatusComplete, FinishReason: "stop", Model: "fast", Deployment: "openai-eu",
			InputTokens: 12, OutputTokens: 1, CachedTokens: 8, Estimated: true, Cost: 0.000125,
			Timings: []byte(`{"ttft_ms":120.5}`), Meta: []byte(`{"attempts":1}`),
			CreatedAt: at(2 * time.Second), UpdatedAt: at(3 * time.Second)},
		userMsg("m3", "acme-c1", "acme", "Thanks", at(4*time.Second)),
	}
	for i := range want {
		m := want[i]
		if err := s.AddMessages(ctx, &m); err != nil {
			t.Fatalf("AddMessage(%s) = %v", m.ID, err)
		}
		if m.Seq != i+1 {
			t.Errorf("AddMessage(%s): Seq = %d, want %d", m.ID, m.Seq, i+1)
		}
		want[i].Seq = i + 1
		c, err := s.GetConversation(ctx, "acme", "acme-c1")
		if err != nil {
			t.Fatal(err)
		}
		if !c.UpdatedAt.Equal(m.CreatedAt) {
			t.Errorf("after AddMessage(%s): conversation UpdatedAt = %v, want %v", m.ID, c.UpdatedAt, m.CreatedAt)
		}
	}
	if diff := cmp.Diff(want, messages(t, s, "acme", "acme-c1")); diff != "" {
		t.Errorf("ListMessages (-want +got):\n%s", diff)
	}
	wantNotFound(t, "AddMessage to a missing conversation",
		s.AddMessages(ctx, new(userMsg("m4", "nope", "acme", "hi", t0))))
	// Seqs are per conversation.
	if m := add(t, s, userMsg("g1", "globex-c1", "globex", "hi", t0)); m.Seq != 1 {
		t.Errorf("first AddMessage to globex-c1: Seq = %d, want 1", m.Seq)
	}
}

func testConcurrentAddMessage(t *testing.T, s store.Store) {
	seed(t, s)
	const n = 20
	seqs := make([]int, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			m := userMsg(fmt.Sprintf("m%02d", i), "acme-c1", "acme", "hi", at(time.Duration(i)*time.Millisecond))
			if err := s.AddMessages(t.Context(), &m); err != nil {
				errs <- err
				return
			}
			seqs[i] = m.Seq
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent AddMessage = %v", err)
	}
	var want []int
	for i := range n {
		want = append(want, i+1)
	}
	slices.Sort(seqs)
	if diff := cmp.Diff(want, seqs); diff != "" {
		t.Errorf("concurrent AddMessage seqs (-want +got):\n%s", diff)
	}
	var got []int
	for _, m := range messages(t, s, "acme", "acme-c1") {
		got = append(got, m.Seq)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListMessages seqs (-want +got):\n%s", diff)
	}
}

func testCheckpointMessage(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	m := add(t, s, streamingMsg("m1", "acme-c1", "acme", at(time.Second)))
	thinking := []byte(`[{"text":"Greet them."}]`)
	if err := s.CheckpointMessage(ctx, "m1", "Hel", thinking, 1, at(2*time.Second)); err != nil {
		t.Fatalf("CheckpointMessage = %v", err)
	}
	want := m
	want.Content, want.Thinking, want.OutputTokens, want.UpdatedAt = "Hel", thinking, 1, at(2*time.Second)
	if diff := cmp.Diff([]store.Message{want}, messages(t, s, "acme", "acme-c1")); diff != "" {
		t.Errorf("after CheckpointMessage (-want +got):\n%s", diff)
	}

	m.Status, m.Content, m.OutputTokens, m.FinishReason, m.UpdatedAt =
		store.StatusComplete, "Hello world", 2, "stop", at(4*time.Second)
	if err := s.FinishMessage(ctx, &m); err != nil {
		t.Fatalf("FinishMessage = %v", err)
	}
	// A checkpoint that arrives after the finish is dropped, without error.
	if err := s.CheckpointMessage(ctx, "m1", "Hello", nil, 1, at(3*time.Second)); err != nil {
		t.Errorf("CheckpointMessage after FinishMessage = %v, want nil", err)
	}
	if diff := cmp.Diff([]store.Message{m}, messages(t, s, "acme", "acme-c1")); diff != "" {
		t.Errorf("CheckpointMessage after FinishMessage changed the message (-want +got):\n%s", diff)
	}
}

func testFinishMessage(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	u := add(t, s, userMsg("m1", "acme-c1", "acme", "Tell me a story", at(time.Second)))
	a := add(t, s, streamingMsg("m2", "acme-c1", "acme", at(2*time.Second)))
	if err := s.CheckpointMessage(ctx, "m2", "Once", []byte(`[{"text":"A sto"}]`), 1, at(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		finish func(m *store.Message)
	}{
		{"complete", func(m *store.Message) {
			m.Status, m.Content, m.FinishReason = store.StatusComplete, "Once upon a time.", "stop"
			m.Model, m.Deployment = "smart", "anthropic-us"
			m.InputTokens, m.OutputTokens, m.CachedTokens, m.Estimated, m.Cost = 40, 5, 32, false, 0.0031
			// JSON keeps its bytes: key order and spacing included.
			m.Timings = []byte(`{"ttft_ms": 210, "total_ms": 900.25}`)
			m.Meta = []byte(`{"z":1,"a":[{"attempt":1,"deployment":"openai-eu"}]}`)
			m.Thinking = []byte(`[{"text":"A story.","signature":"c2ln","format":"anthropic"},{"redacted":"cmVk","format":"anthropic"}]`)
			m.UpdatedAt = at(4 * time.Second)
		}},
		{"error", func(m *store.Message) {
			m.Status, m.Content, m.FinishReason = store.StatusError, "Once upon", ""
			m.OutputTokens, m.Estimated, m.Cost = 2, true, 0.0001
			m.Timings, m.Meta, m.Thinking = nil, nil, nil
			m.ErrorCode, m.ErrorMessage = "upstream_error", "provider returned 503"
			m.UpdatedAt = at(5 * time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.finish(&a)
			if err := s.FinishMessage(ctx, &a); err != nil {
				t.Fatalf("FinishMessage = %v", err)
			}
			if diff := cmp.Diff([]store.Message{u, a}, messages(t, s, "acme", "acme-c1")); diff != "" {
				t.Errorf("after FinishMessage (-want +got):\n%s", diff)
			}
		})
	}
	wantNotFound(t, "FinishMessage(nope)", s.FinishMessage(ctx, &store.Message{ID: "nope", TenantID: "acme"}))
}

func testLastMessages(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	var all []store.Message
	for i := range 5 {
		all = append(all, add(t, s, userMsg(fmt.Sprint("m", i), "acme-c1", "acme", fmt.Sprint("turn ", i), at(time.Duration(i)*time.Second))))
	}
	add(t, s, userMsg("g1", "globex-c1", "globex", "other", t0))
	for _, tc := range []struct {
		n    int
		want []store.Message
	}{
		{0, nil},
		{1, all[4:]},
		{2, all[3:]},
		{5, all},
		{50, all},
	} {
		got, err := s.LastMessages(ctx, "acme", "acme-c1", tc.n)
		if err != nil {
			t.Fatalf("LastMessages(%d) = %v", tc.n, err)
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("LastMessages(%d) (-want +got):\n%s", tc.n, diff)
		}
	}
}

// seedStreaming seeds s, then adds to acme-c1 the user message m1 (at
// 1s) and the answer m2 (2s), checkpointed with "Half an ans", the
// thinking "Hmm" and 3 tokens (4s), and to globex-c1 the answer g1 (3s), never checkpointed;
// it returns the three as added.
func seedStreaming(t *testing.T, s store.Store) (m1, m2, g1 store.Message) {
	t.Helper()
	seed(t, s)
	m1 = add(t, s, userMsg("m1", "acme-c1", "acme", "hi", at(time.Second)))
	m2 = add(t, s, streamingMsg("m2", "acme-c1", "acme", at(2*time.Second)))
	g1 = add(t, s, streamingMsg("g1", "globex-c1", "globex", at(3*time.Second)))
	if err := s.CheckpointMessage(t.Context(), "m2", "Half an ans", []byte(`[{"text":"Hmm"}]`), 3, at(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	return m1, m2, g1
}

func testInterruptStreaming(t *testing.T, s store.Store) {
	ctx := t.Context()
	done, partial, empty := seedStreaming(t, s)
	// A stream written to since the cutoff (alive on another replica) is
	// left alone.
	if n, err := s.InterruptStreaming(ctx, at(3*time.Second), at(time.Minute)); err != nil || n != 0 {
		t.Fatalf("InterruptStreaming before the last writes = %d, %v, want 0, nil", n, err)
	}
	n, err := s.InterruptStreaming(ctx, at(time.Minute), at(time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("InterruptStreaming = %d, %v, want 2, nil", n, err)
	}
	partial.Status, partial.Content, partial.Thinking, partial.OutputTokens, partial.UpdatedAt =
		store.StatusInterrupted, "Half an ans", []byte(`[{"text":"Hmm"}]`), 3, at(time.Minute)
	empty.Status, empty.UpdatedAt = store.StatusInterrupted, at(time.Minute)
	if diff := cmp.Diff([]store.Message{done, partial}, messages(t, s, "acme", "acme-c1")); diff != "" {
		t.Errorf("acme-c1 after InterruptStreaming (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]store.Message{empty}, messages(t, s, "globex", "globex-c1")); diff != "" {
		t.Errorf("globex-c1 after InterruptStreaming (-want +got):\n%s", diff)
	}
	if n, err := s.InterruptStreaming(ctx, at(time.Hour), at(time.Hour)); err != nil || n != 0 {
		t.Errorf("InterruptStreaming again = %d, %v, want 0, nil", n, err)
	}
}

func testInterruptMessage(t *testing.T, s store.Store) {
	ctx := t.Context()
	done, kept, journaled := seedStreaming(t, s)
	ids, err := s.StaleStreaming(ctx, at(5*time.Second), 10)
	if err != nil || !slices.Equal(ids, []string{"g1", "m2"}) {
		t.Fatalf("StaleStreaming = %q, %v, want [g1 m2] (oldest write first)", ids, err)
	}
	if ids, err := s.StaleStreaming(ctx, at(5*time.Second), 1); err != nil || !slices.Equal(ids, []string{"g1"}) {
		t.Errorf("StaleStreaming limit 1 = %q, %v, want [g1]", ids, err)
	}
	if ids, err := s.StaleStreaming(ctx, at(3*time.Second), 10); err != nil || len(ids) != 0 {
		t.Errorf("StaleStreaming before any write = %q, %v, want none", ids, err)
	}
	text := "The journal has more"
	for _, c := range []struct {
		id      string
		content *string
		want    bool
	}{{"m2", nil, true}, {"g1", &text, true}, {"g1", nil, false}, {"m1", &text, false}, {"nope", nil, false}} {
		if ok, err := s.InterruptMessage(ctx, c.id, c.content, 4, at(time.Minute)); err != nil || ok != c.want {
			t.Errorf("InterruptMessage(%s) = %v, %v, want %v", c.id, ok, err, c.want)
		}
	}
	kept.Status, kept.Content, kept.Thinking, kept.OutputTokens, kept.UpdatedAt = store.StatusInterrupted, "Half an ans", []byte(`[{"text":"Hmm"}]`), 3, at(time.Minute)
	journaled.Status, journaled.Content, journaled.OutputTokens, journaled.UpdatedAt = store.StatusInterrupted, text, 4, at(time.Minute)
	if diff := cmp.Diff([]store.Message{done, kept}, messages(t, s, "acme", "acme-c1")); diff != "" {
		t.Errorf("acme-c1 after InterruptMessage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]store.Message{journaled}, messages(t, s, "globex", "globex-c1")); diff != "" {
		t.Errorf("globex-c1 after InterruptMessage (-want +got):\n%s", diff)
	}
	if got, err := s.GetMessage(ctx, kept.ID); err != nil || got.ID != kept.ID || got.TenantID != kept.TenantID || got.Content != kept.Content {
		t.Errorf("GetMessage(%s) = %+v, %v", kept.ID, got, err)
	}
	if _, err := s.GetMessage(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMessage(nope) = %v, want ErrNotFound", err)
	}
	// Another tenant's message, and one that is not there, are not
	// deleted; the tenant's is, once.
	if n, err := s.DeleteMessages(ctx, "globex", kept.ID, "nope"); err != nil || n != 0 {
		t.Errorf("DeleteMessages of another tenant's = %d, %v, want 0", n, err)
	}
	// Reopened once, for one continuation; an answer that ended, or was
	// cut by a shutdown (an error code says so), is not.
	for _, c := range []struct {
		id   string
		want bool
	}{{"m2", true}, {"m2", false}, {"m1", false}, {"nope", false}} {
		if ok, err := s.ReopenMessage(ctx, c.id, at(2*time.Minute)); err != nil || ok != c.want {
			t.Errorf("ReopenMessage(%s) = %v, %v, want %v", c.id, ok, err, c.want)
		}
	}
	kept.Status, kept.UpdatedAt = store.StatusStreaming, at(2*time.Minute)
	if diff := cmp.Diff([]store.Message{done, kept}, messages(t, s, "acme", "acme-c1")); diff != "" {
		t.Errorf("acme-c1 after ReopenMessage (-want +got):\n%s", diff)
	}
	shut := journaled
	shut.ErrorCode, shut.ErrorMessage, shut.Status = "shutting_down", "the server is shutting down", store.StatusInterrupted
	if err := s.FinishMessage(ctx, &shut); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ReopenMessage(ctx, shut.ID, at(3*time.Minute)); err != nil || ok {
		t.Errorf("ReopenMessage of an answer cut by a shutdown = %v, %v, want false", ok, err)
	}
	if n, err := s.DeleteMessages(ctx, "acme", kept.ID, "nope"); err != nil || n != 1 {
		t.Errorf("DeleteMessages = %d, %v, want 1", n, err)
	}
	if n, err := s.DeleteMessages(ctx, "acme", kept.ID); err != nil || n != 0 {
		t.Errorf("DeleteMessages again = %d, %v, want 0", n, err)
	}
	if diff := cmp.Diff([]store.Message{done}, messages(t, s, "acme", "acme-c1")); diff != "" {
		t.Errorf("acme-c1 after DeleteMessages (-want +got):\n%s", diff)
	}
}

func testUsageSummary(t *testing.T, s store.Store) {
	ctx := t.Context()
	day1 := time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)
	from, to := day1.Add(time.Hour), day2.Add(23*time.Hour)
	rows := []store.Usage{
		{TenantID: "acme", Model: "fast", Time: from.Add(-time.Microsecond)}, // before from
		{TenantID: "acme", Model: "fast", Time: from, InputTokens: 10, OutputTokens: 20, CachedTokens: 1, Cost: 0.5,
			AttemptsInputTokens: 10, AttemptsOutputTokens: 3, AttemptsCost: 0.0625}, // a hedge lost
		{TenantID: "acme", Model: "fast", Time: day2.Add(-time.Microsecond), InputTokens: 1, OutputTokens: 2, Cost: 0.25,
			AttemptsInputTokens: 7, AttemptsCost: 0.125}, // a first-token timeout
		{TenantID: "acme", Model: "smart", Time: day1.Add(2 * time.Hour), InputTokens: 100, OutputTokens: 200, Cost: 2},
		{TenantID: "globex", Model: "fast", Time: day1.Add(3 * time.Hour), InputTokens: 7, OutputTokens: 8, CachedTokens: 3, Cost: 0.125},
		{TenantID: "acme", Model: "fast", Time: day2, InputTokens: 1000, OutputTokens: 2000, Cost: 4, Estimated: true},
		{TenantID: "globex", Model: "fast", Time: to.Add(-time.Microsecond), InputTokens: 5, OutputTokens: 6, Cost: 1},
		{TenantID: "globex", Model: "fast", Time: to}, // at to: excluded
	}
	// The first three rows one at a time, the rest in one batch.
	var batch []*store.Usage
	for i := range rows {
		u := &rows[i]
		u.RequestID, u.UserID, u.Surface, u.Deployment, u.Status = fmt.Sprint("r", i), "alice", "chat", "d1", "ok"
		u.TTFTMs, u.TotalMs = 120, 900
		if i >= 3 {
			batch = append(batch, u)
			continue
		}
		if err := s.RecordUsage(ctx, u); err != nil {
			t.Fatalf("RecordUsage(%d) = %v", i, err)
		}
	}
	if err := s.RecordUsage(ctx, batch...); err != nil {
		t.Fatalf("RecordUsage(batch of %d) = %v", len(batch), err)
	}
	if err := s.RecordUsage(ctx); err != nil {
		t.Fatalf("RecordUsage() = %v", err)
	}
	// A batch written again (a retry after a timeout whose write went
	// through) adds nothing: one row per request.
	if err := s.RecordUsage(ctx, batch...); err != nil {
		t.Fatalf("RecordUsage(the same batch again) = %v", err)
	}
	if err := s.RecordUsage(ctx, &rows[1]); err != nil {
		t.Fatalf("RecordUsage(row 1 again) = %v", err)
	}
	// A batch larger than any store's statement size, for another tenant.
	var many []*store.Usage
	for i := range 37 {
		many = append(many, &store.Usage{RequestID: fmt.Sprint("m", i), TenantID: "umbrella", UserID: "u", Surface: "openai",
			Model: "fast", Deployment: "d1", Status: "ok", Time: day1.Add(4 * time.Hour), InputTokens: 1, OutputTokens: i})
	}
	if err := s.RecordUsage(ctx, many...); err != nil {
		t.Fatalf("RecordUsage(37 rows) = %v", err)
	}
	if got, err := s.UsageSummary(ctx, "umbrella", from, to); err != nil || len(got) != 1 || got[0].Requests != 37 || got[0].OutputTokens != 666 {
		t.Errorf("37 rows in one batch: %+v, %v", got, err)
	}
	if many[36].Time.IsZero() {
		t.Error("the batch's Times were not set")
	}
	acme := []store.UsageSum{
		{TenantID: "acme", Model: "fast", Day: "2025-03-14", Sums: store.Sums{Requests: 2, InputTokens: 11, OutputTokens: 22, CachedTokens: 1, Cost: 0.75,
			AttemptsInputTokens: 17, AttemptsOutputTokens: 3, AttemptsCost: 0.1875}},
		{TenantID: "acme", Model: "smart", Day: "2025-03-14", Sums: store.Sums{Requests: 1, InputTokens: 100, OutputTokens: 200, Cost: 2}},
		{TenantID: "acme", Model: "fast", Day: "2025-03-15", Sums: store.Sums{Requests: 1, InputTokens: 1000, OutputTokens: 2000, Cost: 4}},
	}
	globex := []store.UsageSum{
		{TenantID: "globex", Model: "fast", Day: "2025-03-14", Sums: store.Sums{Requests: 1, InputTokens: 7, OutputTokens: 8, CachedTokens: 3, Cost: 0.125}},
		{TenantID: "globex", Model: "fast", Day: "2025-03-15", Sums: store.Sums{Requests: 1, InputTokens: 5, OutputTokens: 6, Cost: 1}},
	}
	for _, tc := range []struct {
		name     string
		tenant   string
		from, to time.Time
		want     []store.UsageSum
	}{
		{"all tenants", "", from, to, []store.UsageSum{acme[0], acme[1], globex[0], {TenantID: "umbrella", Model: "fast", Day: "2025-03-14", Sums: store.Sums{Requests: 37, InputTokens: 37, OutputTokens: 666}}, acme[2], globex[1]}},
		{"acme", "acme", from, to, acme},
		{"globex", "globex", from, to, globex},
		{"unknown tenant", "initech", from, to, nil},
		{"empty range", "", from, from, nil},
		{"one day", "", day2, day2.AddDate(0, 0, 1), []store.UsageSum{acme[2],
			{TenantID: "globex", Model: "fast", Day: "2025-03-15", Sums: store.Sums{Requests: 2, InputTokens: 5, OutputTokens: 6, Cost: 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.UsageSummary(ctx, tc.tenant, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("UsageSummary(%q, %v, %v) (-want +got):\n%s", tc.tenant, tc.from, tc.to, diff)
			}
		})
	}
}

// testTimestamps checks that times come back in UTC, truncated to the
// microsecond, whatever their location and precision going in.
func testTimestamps(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := time.Date(2025, 6, 30, 23, 59, 59, 123_456_789, time.FixedZone("UTC+2", 2*3600))
	want := time.Date(2025, 6, 30, 21, 59, 59, 123_456_000, time.UTC)
	if err := s.CreateTenant(ctx, &store.Tenant{ID: "acme", CreatedAt: in}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateConversation(ctx, &store.Conversation{ID: "c1", TenantID: "acme", CreatedAt: in, UpdatedAt: in}); err != nil {
		t.Fatal(err)
	}
	m := userMsg("m1", "c1", "acme", "hi", in)
	if err := s.AddMessages(ctx, &m); err != nil {
		t.Fatal(err)
	}
	tenant, err := s.GetTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.GetConversation(ctx, "acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	ms := messages(t, s, "acme", "c1")
	for _, tc := range []struct {
		name string
		got  time.Time
	}{
		{"Tenant.CreatedAt", tenant.CreatedAt},
		{"Conversation.CreatedAt", c.CreatedAt},
		{"Conversation.UpdatedAt", c.UpdatedAt},
		{"Message.CreatedAt", ms[0].CreatedAt},
		{"Message.UpdatedAt", ms[0].UpdatedAt},
	} {
		if !tc.got.Equal(want) || tc.got.Location() != time.UTC {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, want)
		}
	}

	// A zero time means now.
	before := time.Now().Add(-time.Second)
	if err := s.CreateConversation(ctx, &store.Conversation{ID: "c2", TenantID: "acme"}); err != nil {
		t.Fatal(err)
	}
	c, err = s.GetConversation(ctx, "acme", "c2")
	if err != nil {
		t.Fatal(err)
	}
	if c.CreatedAt.Before(before) || c.UpdatedAt.Before(before) {
		t.Errorf("conversation created with zero times: CreatedAt %v, UpdatedAt %v, want about now", c.CreatedAt, c.UpdatedAt)
	}
}

// A turn's messages (the user's and the assistant's placeholder) are
// written together: consecutive seqs, in one transaction, with the
// conversation when it is new.
func testAddMessagesTogether(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	u, a := userMsg("u1", "c9", "acme", "hi", at(time.Second)), streamingMsg("a1", "c9", "acme", at(time.Second))
	c := &store.Conversation{ID: "c9", TenantID: "acme", UserID: "alice", CreatedAt: t0}
	if err := s.CreateConversation(ctx, c, &u, &a); err != nil {
		t.Fatal(err)
	}
	if u.Seq != 1 || a.Seq != 2 || !c.UpdatedAt.Equal(at(time.Second)) {
		t.Errorf("seqs %d, %d, conversation updated %v", u.Seq, a.Seq, c.UpdatedAt)
	}
	u2, a2 := userMsg("u2", "c9", "acme", "more", at(2*time.Second)), streamingMsg("a2", "c9", "acme", at(2*time.Second))
	if err := s.AddMessages(ctx, &u2, &a2); err != nil {
		t.Fatal(err)
	}
	if u2.Seq != 3 || a2.Seq != 4 {
		t.Errorf("seqs %d, %d, want 3, 4", u2.Seq, a2.Seq)
	}
	if diff := cmp.Diff([]store.Message{u, a, u2, a2}, messages(t, s, "acme", "c9")); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	// All or nothing: a duplicate ID in the second message leaves no trace
	// of the first, nor of the conversation.
	dup := userMsg("u1", "c10", "acme", "dup", at(3*time.Second))
	first := userMsg("u3", "c10", "acme", "first", at(3*time.Second))
	if err := s.CreateConversation(ctx, &store.Conversation{ID: "c10", TenantID: "acme"}, &first, &dup); err == nil {
		t.Fatal("CreateConversation with a duplicate message ID succeeded")
	}
	wantNotFound(t, "conversation of a failed CreateConversation", func() error { _, err := s.GetConversation(ctx, "acme", "c10"); return err }())
	ok := userMsg("u4", "c9", "acme", "ok", at(4*time.Second))
	dup2 := userMsg("u2", "c9", "acme", "dup", at(4*time.Second))
	if err := s.AddMessages(ctx, &ok, &dup2); err == nil {
		t.Fatal("AddMessages with a duplicate ID succeeded")
	}
	if ms := messages(t, s, "acme", "c9"); len(ms) != 4 {
		t.Errorf("%d messages after a failed AddMessages, want 4", len(ms))
	}
	next := userMsg("u5", "c9", "acme", "next", at(5*time.Second))
	if err := s.AddMessages(ctx, &next); err != nil || next.Seq != 5 {
		t.Errorf("after a failed AddMessages: seq %d, %v, want 5 (no gap)", next.Seq, err)
	}
}
