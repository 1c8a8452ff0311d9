package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A database is Arborist's only when its schema is exactly one Arborist
// writes: the application id, and for its schema version the very tables,
// columns and indexes the migrations up to it create, and nothing else
// (no table, trigger or view of its own). Anything else is refused before
// a byte is written, even by a reading open, and left as it was: a table
// missing (a later query would fail naming it), or a trigger planted on
// runs (it would fire on Arborist's writes) means the file is not what
// the code expects.

// object is one schema object as sqlite_master lists it, its SQL with the
// whitespace collapsed (a table's SQL holds its columns, their types,
// defaults and constraints, and ALTER TABLE ADD COLUMN appends to it).
type object struct {
	kind, name, table, sql string
}

func (o object) String() string {
	if o.kind == "table" {
		return "table " + o.name
	}
	return o.kind + " " + o.name + " (on " + o.table + ")"
}

// maxObjects bounds the schema a header read takes in: Arborist's has a few
// dozen objects.
const maxObjects = 4096

// knownSchemas are the objects of each schema version (index: the
// version), made once by running the migrations in a database in memory.
var knownSchemas = sync.OnceValues(func() ([][]object, error) {
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx) // one connection: one database in memory
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	out := make([][]object, 0, len(migrations)+1)
	for v := 0; ; v++ {
		_, _, objs, err := readSchema(ctx, conn)
		if err != nil {
			return nil, err
		}
		out = append(out, objs)
		if v == len(migrations) {
			return out, nil
		}
		if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
			return nil, fmt.Errorf("store: migration %d: %w", v+1, err)
		}
	}
})

// readSchema reads a database's application id, schema version and schema
// objects in one statement, so one snapshot: read separately, the id could
// come from before another process's migration committed and the tables
// from after it.
func readSchema(ctx context.Context, q queryer) (appID, version int, objs []object, err error) {
	rows, err := q.QueryContext(ctx, `SELECT a.application_id, v.user_version, m.type, m.name, m.tbl_name, m.sql
FROM pragma_application_id AS a JOIN pragma_user_version AS v
LEFT JOIN (SELECT type, name, tbl_name, coalesce(sql, '') AS sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_stat%' LIMIT ?) AS m`, maxObjects+1)
	if err != nil {
		return 0, 0, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var kind, name, table, text sql.NullString
		if err := rows.Scan(&appID, &version, &kind, &name, &table, &text); err != nil {
			return 0, 0, nil, err
		}
		if kind.Valid {
			objs = append(objs, object{kind.String, name.String, table.String, strings.Join(strings.Fields(text.String), " ")})
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, nil, err
	}
	slices.SortFunc(objs, func(a, b object) int { return strings.Compare(a.kind+"\x00"+a.name, b.kind+"\x00"+b.name) })
	return appID, version, objs, nil
}

// schemaDiffers says how objs differ from schema version's ("" when they
// are exactly it).
func schemaDiffers(version int, objs []object) (string, error) {
	known, err := knownSchemas()
	if err != nil {
		return "", err
	}
	if len(objs) > maxObjects {
		return fmt.Sprintf("more than %d schema objects", maxObjects), nil
	}
	want := map[string]object{}
	for _, o := range known[version] {
		want[o.kind+" "+o.name] = o
	}
	var diffs []string
	for _, o := range objs {
		w, ok := want[o.kind+" "+o.name]
		switch {
		case !ok:
			diffs = append(diffs, o.String()+" is not Arborist's")
		case w != o:
			diffs = append(diffs, o.String()+" differs from Arborist's (its columns or constraints)")
		}
		delete(want, o.kind+" "+o.name)
	}
	for _, o := range known[version] {
		if _, missing := want[o.kind+" "+o.name]; missing {
			diffs = append(diffs, o.String()+" is missing")
		}
	}
	if len(diffs) > 4 {
		diffs = append(diffs[:4], fmt.Sprintf("and %d more differences", len(diffs)-4))
	}
	return strings.Join(diffs, "; "), nil
}
