package store

import (
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

// Migration is one schema change of an implementation: the file
// migrations/NNNN_name.sql of its embedded file system, applied in order
// of NNNN (Version). A migration, once released, is never edited: changes
// go in a new file. Each implementation applies its own, in its own
// dialect, and records the versions applied in its schema_migrations
// table.
type Migration struct {
	Version int
	Name    string // the file's name, for errors
	SQL     string
}

// LoadMigrations returns fsys's migrations/*.sql ordered by version. A
// file whose name does not start with a positive number, or two files of
// the same number, is an error: either would make the order, and so the
// schema, depend on file names rather than on the numbers.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version number", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s: same version", ms[i-1].Name, ms[i].Name)
		}
	}
	return ms, nil
}
