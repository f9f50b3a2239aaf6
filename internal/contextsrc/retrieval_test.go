package contextsrc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var _ Source = Retrieval{}
var _ Source = (*Lookup)(nil)

func TestRetrievalFetch(t *testing.T) {
	ix := buildDocs(t)
	r := Retrieval{Index: ix, TopK: 2}
	q := "How long does shipping to Switzerland take?"
	got, err := r.Fetch(t.Context(), Query{Question: q})
	if err != nil {
		t.Fatal(err)
	}
	hits := ix.Search(q, 2)
	want := Result{
		Source: "retrieval",
		Text:   fmt.Sprintf("[1] (%s) %s\n\n[2] (%s) %s", hits[0].Doc, hits[0].Text, hits[1].Doc, hits[1].Text),
		Citations: []Citation{
			{N: 1, Doc: hits[0].Doc, Passage: hits[0].Passage},
			{N: 2, Doc: hits[1].Doc, Passage: hits[1].Passage},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Fetch (-want +got):\n%s", diff)
	}
	if want := "[1] (shipping.md) # Shipping times and costs\n\nStandard shipping within Germany"; got.Text[:len(want)] != want {
		t.Errorf("Fetch text starts %q, want %q", got.Text[:len(want)], want)
	}
}

func TestRetrievalDefaults(t *testing.T) {
	ix := buildDocs(t)
	got, err := Retrieval{Index: ix, SourceName: "docs"}.Fetch(t.Context(), Query{Question: "days"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != "docs" || len(got.Citations) != DefaultTopK {
		t.Errorf("Fetch = source %q, %d citations; want docs, %d", got.Source, len(got.Citations), DefaultTopK)
	}
}

func TestRetrievalNoHits(t *testing.T) {
	got, err := Retrieval{Index: buildDocs(t)}.Fetch(t.Context(), Query{Question: "zeppelin"})
	if diff := cmp.Diff(Result{Source: "retrieval"}, got); diff != "" || err != nil {
		t.Errorf("Fetch(no match) = %v (-want +got):\n%s", err, diff)
	}
}

func TestRetrievalErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (Retrieval{Index: buildDocs(t)}).Fetch(ctx, Query{Question: "shipping"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Fetch(cancelled ctx) = %v, want context.Canceled", err)
	}
	if _, err := (Retrieval{}).Fetch(t.Context(), Query{Question: "shipping"}); err == nil {
		t.Error("Fetch without an index = nil error")
	}
}
