package app

import (
	"os/exec"
	"strings"
	"testing"
)

// allowed are the packages of Arborist's own the faces may import: the
// workflow core, the embedded assets, and each other (main wires app and
// app/cli). Everything else of Arborist's (the core's parts, the engine,
// the kernels) is reached through the core, which re-exports the plain
// value types the faces show.
var allowed = []string{"arborist/profiles", "arborist/assets", "arborist/app"}

// TestImports fails when a package under app/ (the GUI, the CLI verbs,
// anything added beside them) imports a package of Arborist's other than
// the workflow core, as listed by `go list`. Test files are not listed:
// tests may reach past the core to set up what they check.
func TestImports(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list imports with")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("unexpected go list line %q", line)
		}
		pkgs++
		for _, imp := range strings.Fields(imports) {
			if imp != "arborist" && !strings.HasPrefix(imp, "arborist/") {
				continue // the standard library, Fyne, gonum
			}
			ok := false
			for _, a := range allowed {
				ok = ok || imp == a || strings.HasPrefix(imp, a+"/")
			}
			if !ok || strings.HasPrefix(imp, "arborist/profiles/") {
				t.Errorf("%s imports %s: go through arborist/profiles (the workflow core) instead", pkg, imp)
			}
		}
	}
	if pkgs < 2 {
		t.Fatalf("go list found %d packages under app/, want app and app/cli at least:\n%s", pkgs, out)
	}
}
