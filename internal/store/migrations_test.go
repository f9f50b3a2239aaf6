package store

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestLoadMigrations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  []int // nil: an error
	}{
		{"ordered by number", []string{"0010_c.sql", "0002_b.sql", "0001_a.sql"}, []int{1, 2, 10}},
		{"no number", []string{"0001_a.sql", "init.sql"}, nil},
		{"zero", []string{"0000_a.sql"}, nil},
		{"same number", []string{"0001_a.sql", "1_b.sql"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tc.files {
				fsys["migrations/"+f] = &fstest.MapFile{Data: []byte("SELECT 1;")}
			}
			ms, err := LoadMigrations(fsys)
			if tc.want == nil {
				if err == nil {
					t.Errorf("LoadMigrations(%v) = %v, want an error", tc.files, ms)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadMigrations(%v) = %v", tc.files, err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LoadMigrations(%v) versions (-want +got):\n%s", tc.files, diff)
			}
		})
	}
}
