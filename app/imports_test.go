package app

import (
	"os/exec"
	"strings"
	"testing"
)

// forbidden are the packages the faces must reach only through the
// workflow core (arborist/profiles/workbench): backends, GGUF files, models and
// tokenizers.
var forbidden = []string{"arborist/kernels", "arborist/engine/gguf", "arborist/engine/model", "arborist/engine/tokenizer"}

// TestImports fails when a package under app/ (the GUI, the CLI verbs,
// anything added beside them) imports a backend, GGUF, model or tokenizer
// package directly, as listed by `go list`.
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
			for _, f := range forbidden {
				if imp == f || strings.HasPrefix(imp, f+"/") {
					t.Errorf("%s imports %s: go through arborist/profiles/workbench (the workflow core) instead", pkg, imp)
				}
			}
		}
	}
	if pkgs < 2 {
		t.Fatalf("go list found %d packages under app/, want app and app/cli at least:\n%s", pkgs, out)
	}
}
