package contextsrc

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const docsDir = "testdata/docs"

func buildDocs(t testing.TB) *Index {
	t.Helper()
	ix, err := BuildIndex(docsDir)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// writeFiles creates files under a temporary folder and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuildIndexFiles(t *testing.T) {
	ix := buildDocs(t)
	docs := map[string]int{}
	for _, p := range ix.passages {
		docs[p.doc]++
	}
	// Hidden files and other extensions are skipped; nested folders are
	// walked and named with forward slashes.
	want := map[string]int{"help/payments.txt": 1, "returns.md": 3, "shipping.md": 2, "tracking.md": 2, "warranty.md": 2}
	if diff := cmp.Diff(want, docs); diff != "" {
		t.Errorf("passages per document (-want +got):\n%s", diff)
	}
	if ix.Len() != 10 {
		t.Errorf("Len() = %d, want 10", ix.Len())
	}
	if hits := ix.Search("unicorn", 3); hits != nil {
		t.Errorf(`Search("unicorn") = %v, want nil: hidden and .html files are not indexed`, hits)
	}
}

func TestBuildIndexErrors(t *testing.T) {
	if _, err := BuildIndex(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("BuildIndex(missing folder) = nil error")
	}
	if _, err := BuildIndex(filepath.Join(docsDir, "returns.md")); err == nil {
		t.Error("BuildIndex(a file) = nil error")
	}
	ix, err := BuildIndex(t.TempDir())
	if err != nil || ix.Len() != 0 || ix.Search("anything", 3) != nil {
		t.Errorf("BuildIndex(empty folder) = %d passages, %v; want an empty index", ix.Len(), err)
	}
}

func TestSearchRanking(t *testing.T) {
	ix := buildDocs(t)
	tests := []struct {
		query   string
		wantDoc string
		// wantIn is a phrase of the expected first passage.
		wantIn string
	}{
		{"How long does shipping to Switzerland take?", "shipping.md", "Standard shipping within Germany"},
		{"how much is express delivery", "shipping.md", "Express shipping delivers"},
		{"Can I return shoes after 30 days?", "returns.md", "within 30 days of delivery"},
		{"when will the refund reach my card", "returns.md", "We refund to the original payment method"},
		{"can I return opened earphones", "returns.md", "cannot be returned"},
		{"my blender motor stopped working, is it covered?", "warranty.md", "two-year warranty"},
		{"how do I make a warranty claim", "warranty.md", "To make a warranty claim"},
		{"tracking page says label created", "tracking.md", "label created"},
		{"parcel marked delivered but I did not receive it", "tracking.md", "marked as delivered"},
		{"Do you take PayPal or Klarna?", "help/payments.txt", "PayPal"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			hits := ix.Search(tt.query, 3)
			if len(hits) == 0 {
				t.Fatalf("Search(%q) = nil", tt.query)
			}
			if hits[0].Doc != tt.wantDoc || !strings.Contains(hits[0].Text, tt.wantIn) {
				t.Errorf("Search(%q)[0] = %s #%d %.60q..., want %s containing %q", tt.query, hits[0].Doc, hits[0].Passage, hits[0].Text, tt.wantDoc, tt.wantIn)
			}
			for i := 1; i < len(hits); i++ {
				if hits[i].Score > hits[i-1].Score {
					t.Errorf("hits not best first: %v then %v", hits[i-1].Score, hits[i].Score)
				}
			}
		})
	}
}

func TestSearchEdges(t *testing.T) {
	ix := buildDocs(t)
	for _, tt := range []struct {
		name  string
		query string
		k     int
		want  int
	}{
		{"empty query", "", 3, 0},
		{"only stopwords", "what is the", 3, 0},
		{"no match", "zeppelin", 3, 0},
		{"k zero", "shipping", 0, 0},
		{"k larger than the matches", "klarna", 10, 1},
		{"k bounds the hits", "days", 2, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hits := ix.Search(tt.query, tt.k)
			if len(hits) != tt.want || (tt.want == 0 && hits != nil) {
				t.Errorf("Search(%q, %d) = %d hits (nil %v), want %d", tt.query, tt.k, len(hits), hits == nil, tt.want)
			}
		})
	}
}

// TestBM25Score checks the scores of a tiny corpus against the formula
// worked by hand. Three one-passage documents with 3, 2 and 4 tokens: N = 3,
// avgdl = 3.
func TestBM25Score(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.md": "Apple apple banana",
		"b.md": "banana, cherry!",
		"c.md": "cherry date elderberry fig",
	})
	ix, err := BuildIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	// apple: df 1, idf = ln(1 + 2.5/1.5) = ln(8/3); in a.md tf 2, dl 3,
	// norm = 1.2·(0.25 + 0.75·3/3) = 1.2, score = idf·2·2.2/(2 + 1.2).
	apple := math.Log(8.0/3) * 4.4 / 3.2
	// banana, cherry: df 2, idf = ln(1 + 1.5/2.5) = ln(1.6). In b.md both
	// have tf 1 and dl 2: norm = 1.2·(0.25 + 0.75·2/3) = 0.9, so each adds
	// idf·2.2/1.9. In a.md banana has tf 1, dl 3: idf·2.2/2.2. In c.md
	// cherry has tf 1, dl 4: norm = 1.2·(0.25 + 1) = 1.5, idf·2.2/2.5.
	idf := math.Log(1.6)
	tests := []struct {
		query string
		want  []Hit
	}{
		{"apple", []Hit{{Doc: "a.md", Text: "Apple apple banana", Score: apple}}},
		{"banana cherry banana", []Hit{
			{Doc: "b.md", Text: "banana, cherry!", Score: 2 * idf * 2.2 / 1.9},
			{Doc: "a.md", Text: "Apple apple banana", Score: idf},
			{Doc: "c.md", Text: "cherry date elderberry fig", Score: idf * 2.2 / 2.5},
		}},
	}
	for _, tt := range tests {
		got := ix.Search(tt.query, 5)
		approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })
		if diff := cmp.Diff(tt.want, got, approx); diff != "" {
			t.Errorf("Search(%q) (-want +got):\n%s", tt.query, diff)
		}
	}
}

func TestSearchTiesAreOrdered(t *testing.T) {
	dir := writeFiles(t, map[string]string{"b.md": "same words", "a.md": "same words", "c/a.md": "same words"})
	ix, err := BuildIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range ix.Search("same", 3) {
		got = append(got, h.Doc)
	}
	if diff := cmp.Diff([]string{"a.md", "b.md", "c/a.md"}, got); diff != "" {
		t.Errorf("tied hits (-want +got):\n%s", diff)
	}
}

func BenchmarkBuildIndex(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildIndex(docsDir); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSearch(b *testing.B) {
	ix := buildDocs(b)
	b.ReportAllocs()
	for b.Loop() {
		ix.Search("My parcel is marked as delivered but I did not receive it, can I get a refund?", 3)
	}
}
