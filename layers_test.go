package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The layer table: where every package of the module sits, and so what it
// may import. Data flows faces -> core -> engine -> kernels; leaves (plain
// value types and helpers that import no other layer) sit below them all.
// docs/ARCHITECTURE.md draws the same table with the real arrows.
//
// The rules, for the imports of a package's own files:
//
//   - A package imports its own layer or a lower one, never a higher.
//   - A face imports only other faces, arborist/profiles (the workflow
//     core's one package), the value packages (marked faces: plain value
//     types and their pure rules, which a face names and the core takes
//     and returns; the core's, and the latency leaf) and arborist/assets:
//     the faces ask the core and show what it returns.
//   - A backend is imported only by backendLinker, which links every
//     backend in; everything else finds them by name in the kernels
//     registry (kernels.Open, kernels.LookupHost).
//   - A test-support package (a suite or fixtures that tests share) is
//     imported only by tests and by other test-support packages.
//
// For the imports of test files (_test.go, either package): a test may
// import its own layer and any lower one, backends and test-support
// packages included (a test sets up what it checks with the parts below
// it), but not a higher layer, save for the edges in testExceptions.
//
// Every .go file is read whatever its build tags, so the code behind tag
// cuda is held to the same table.
var layers = map[string]placement{
	// faces: the binary's main package, the GUI and every package under
	// app/ (the CLI verbs, locale, and any face added beside them)
	"arborist":         {layer: layerFace},
	"arborist/app/...": {layer: layerFace},

	// the workflow core
	"arborist/profiles":                       {layer: layerCore},
	"arborist/profiles/config":                {layer: layerCore, faces: true},
	"arborist/profiles/costmodel":             {layer: layerCore},
	"arborist/profiles/hardware":              {layer: layerCore},
	"arborist/profiles/jobs":                  {layer: layerCore, faces: true},
	"arborist/profiles/jinja":                 {layer: layerCore},
	"arborist/profiles/llamacheck":            {layer: layerCore, faces: true},
	"arborist/profiles/llamacpp":              {layer: layerCore},
	"arborist/profiles/loadtest":              {layer: layerCore, faces: true},
	"arborist/profiles/loadtest/loadtesttest": {layer: layerCore, role: testSupport},
	"arborist/profiles/measure":               {layer: layerCore},
	"arborist/profiles/outfile":               {layer: layerCore},
	"arborist/profiles/pairs":                 {layer: layerCore},
	"arborist/profiles/predictor":             {layer: layerCore},
	"arborist/profiles/serving":               {layer: layerCore, faces: true},
	"arborist/profiles/store":                 {layer: layerCore},
	"arborist/profiles/trainsize":             {layer: layerCore, faces: true},

	// the engine
	"arborist/engine/demo":                      {layer: layerEngine},
	"arborist/engine/drafter":                   {layer: layerEngine},
	"arborist/engine/generate":                  {layer: layerEngine},
	"arborist/engine/gguf":                      {layer: layerEngine},
	"arborist/engine/hidden":                    {layer: layerEngine},
	"arborist/engine/model":                     {layer: layerEngine},
	"arborist/engine/model/modeltest":           {layer: layerEngine, role: testSupport},
	"arborist/engine/model/modeltest/testfiles": {layer: layerEngine, role: testSupport},
	"arborist/engine/sample":                    {layer: layerEngine},
	"arborist/engine/spec":                      {layer: layerEngine},
	"arborist/engine/synth":                     {layer: layerEngine},
	"arborist/engine/tokenizer":                 {layer: layerEngine},
	"arborist/engine/tree":                      {layer: layerEngine},

	// the kernels: the contract and registry, the block layouts, the
	// device suite, and the backends
	"arborist/kernels":            {layer: layerKernels},
	"arborist/kernels/quant":      {layer: layerKernels},
	"arborist/kernels/devicetest": {layer: layerKernels, role: testSupport},
	"arborist/kernels/cpu":        {layer: layerKernels, role: backend},
	"arborist/kernels/cuda":       {layer: layerKernels, role: backend},

	// leaves
	"arborist/assets":            {layer: layerLeaf},
	"arborist/internal/filekind": {layer: layerLeaf},
	"arborist/profiles/latency":  {layer: layerLeaf, faces: true},
}

// backendLinker is the one package that imports the backends
// (profiles/pairs/backends.go: a blank import each, and the CUDA
// hand-off).
const backendLinker = "arborist/profiles/pairs"

// testExceptions are test imports of a higher layer, each with its reason.
var testExceptions = map[[2]string]string{
	{"arborist/kernels/cuda", "arborist/engine/model"}:           "the launch budget (budget_cuda_test.go) counts what a real model's passes ask of the driver",
	{"arborist/kernels/cuda", "arborist/engine/synth"}:           "the launch budget builds its models with synth",
	{"arborist/kernels/cuda", "arborist/engine/model/modeltest"}: "the fast path's whole passes are held to the verified path's on the model suite's files (fast_model_cuda_test.go)",
}

// layer is a rung of the table; a package imports its own rung or lower.
type layer int

const (
	layerLeaf layer = iota
	layerKernels
	layerEngine
	layerCore
	layerFace
)

func (l layer) String() string {
	return [...]string{"leaf", "kernels", "engine", "core", "face"}[l]
}

// role marks the packages the layers alone do not place.
type role int

const (
	ordinary    role = iota
	backend          // imported by backendLinker only
	testSupport      // imported by tests and other test-support packages only
)

type placement struct {
	layer layer
	role  role
	// faces: a value package of the core (its value types and their pure
	// rules), which the faces import beside arborist/profiles rather than
	// through aliases of it
	faces bool
}

// place finds pkg in table: its own entry, or a folder entry ("x/...")
// above it.
func place(table map[string]placement, pkg string) (placement, string, bool) {
	if p, ok := table[pkg]; ok {
		return p, pkg, true
	}
	for key, p := range table {
		if dir, ok := strings.CutSuffix(key, "/..."); ok && (pkg == dir || strings.HasPrefix(pkg, dir+"/")) {
			return p, key, true
		}
	}
	return placement{}, "", false
}

// edge is one import of a package of the module by a file of another.
type edge struct {
	from, to string
	test     bool   // the file is a _test.go
	file     string // the importing file, for messages
}

// checkLayers holds pkgs (every package of the module) and edges (their
// imports, of any module) to table, and returns what breaks it, one
// message per fault, naming the packages and the rule.
func checkLayers(table map[string]placement, exceptions map[[2]string]string, pkgs []string, edges []edge) []string {
	var out []string
	used := map[string]bool{}
	for _, pkg := range pkgs {
		_, key, ok := place(table, pkg)
		if !ok {
			out = append(out, fmt.Sprintf("package %s is in no layer: add it to the table in layers_test.go (face, core, engine, kernels or leaf) and to docs/ARCHITECTURE.md", pkg))
			continue
		}
		used[key] = true
	}
	for key := range table {
		if !used[key] {
			out = append(out, fmt.Sprintf("the layer table places %s, which is no package of the module: remove it", key))
		}
	}
	usedExc := map[[2]string]bool{}
	for _, e := range edges {
		if e.to != "arborist" && !strings.HasPrefix(e.to, "arborist/") || e.from == e.to {
			continue // the standard library and other modules; an external test of its own package
		}
		from, _, okf := place(table, e.from)
		to, _, okt := place(table, e.to)
		if !okf || !okt {
			if !okt {
				out = append(out, fmt.Sprintf("%s: %s imports %s, which is in no layer", e.file, e.from, e.to))
			}
			continue
		}
		who := e.from
		if e.test {
			who = e.from + "'s test"
		}
		bad := func(rule string) {
			out = append(out, fmt.Sprintf("%s: %s imports %s: %s", e.file, who, e.to, rule))
		}
		if e.test {
			if to.layer > from.layer {
				if _, ok := exceptions[[2]string{e.from, e.to}]; ok {
					usedExc[[2]string{e.from, e.to}] = true
					continue
				}
				bad(fmt.Sprintf("a test imports its own layer (%s) and below, never a higher one (%s)", from.layer, to.layer))
			}
			continue
		}
		switch {
		case to.role == testSupport && from.role != testSupport:
			bad("a test-support package is imported by tests only")
		case to.role == backend && e.from != backendLinker:
			bad("a backend is imported by " + backendLinker + " only; elsewhere find it by name in the kernels registry (kernels.Open, kernels.LookupHost)")
		case from.layer == layerFace && to.layer != layerFace && e.to != "arborist/profiles" && e.to != "arborist/assets" && !to.faces:
			bad("a face imports only arborist/profiles, the core's value packages (faces: true), arborist/assets and other faces")
		case to.layer > from.layer:
			bad(fmt.Sprintf("imports go down the layers (face > core > engine > kernels > leaf), never from %s up to %s", from.layer, to.layer))
		}
	}
	for exc, why := range exceptions {
		if !usedExc[exc] {
			out = append(out, fmt.Sprintf("the test exception %s -> %s (%s) is no longer needed: remove it", exc[0], exc[1], why))
		}
	}
	sort.Strings(out)
	return out
}

// scanModule reads the package clause and imports of every .go file under
// root (the module's folder), whatever its build tags, skipping testdata,
// hidden folders and nested modules; it returns the module's packages and
// their imports.
func scanModule(root, module string) ([]string, []edge, error) {
	pkgs := map[string]bool{}
	var edges []edge
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := module
		if rel != "." {
			pkg = module + "/" + filepath.ToSlash(rel)
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkgs[pkg] = true
		for _, imp := range f.Imports {
			to, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			rf, _ := filepath.Rel(root, path)
			edges = append(edges, edge{from: pkg, to: to, test: strings.HasSuffix(name, "_test.go"), file: filepath.ToSlash(rf)})
		}
		return nil
	})
	var list []string
	for p := range pkgs {
		list = append(list, p)
	}
	sort.Strings(list)
	return list, edges, err
}

// TestLayers holds every package of the module, and every import of its
// files, to the layer table.
func TestLayers(t *testing.T) {
	pkgs, edges, err := scanModule(".", "arborist")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range checkLayers(layers, testExceptions, pkgs, edges) {
		t.Error(msg)
	}
	// the scan read the imports (checkLayers has found every package the
	// table names): edges every build has are there
	for _, want := range []edge{
		{from: "arborist/app", to: "arborist/profiles"},
		{from: "arborist/profiles/pairs", to: "arborist/kernels/cpu"},
		{from: "arborist/engine/model", to: "arborist/kernels"},
		{from: "arborist/kernels/cuda", to: "arborist/kernels"},
	} {
		found := false
		for _, e := range edges {
			found = found || e.from == want.from && e.to == want.to && !e.test
		}
		if !found {
			t.Errorf("the scan found no import of %s by %s: it did not read the module", want.to, want.from)
		}
	}
}

// TestLayerRulesCatch feeds the checker the module's packages (as the
// table places them) and one edge at a time: each edge that breaks a rule
// gives one message naming both packages, and each that keeps them none.
func TestLayerRulesCatch(t *testing.T) {
	pkgs := []string{"arborist/app", "arborist/app/cli", "arborist/app/serve"}
	for key := range layers {
		if key != "arborist" && !strings.HasSuffix(key, "/...") {
			pkgs = append(pkgs, key)
		}
	}
	for _, c := range []struct {
		e    edge
		rule string // "" where the edge keeps the rules
	}{
		{edge{from: "arborist/engine/spec", to: "arborist/profiles"}, "never from engine up to core"},
		{edge{from: "arborist/kernels", to: "arborist/engine/model"}, "never from kernels up to engine"},
		{edge{from: "arborist/profiles/latency", to: "arborist/engine/sample"}, "never from leaf up to engine"},
		{edge{from: "arborist/app", to: "arborist/engine/model"}, "a face imports only"},
		{edge{from: "arborist/app/serve", to: "arborist/profiles/store"}, "a face imports only"},
		{edge{from: "arborist/engine/hidden", to: "arborist/kernels/cpu"}, "a backend is imported by arborist/profiles/pairs only"},
		{edge{from: "arborist/profiles/hardware", to: "arborist/kernels/cpu"}, "a backend is imported by arborist/profiles/pairs only"},
		{edge{from: "arborist/profiles", to: "arborist/engine/model/modeltest"}, "imported by tests only"},
		{edge{from: "arborist/engine/model", to: "arborist/profiles/store", test: true}, "never a higher one"},
		{edge{from: "arborist/kernels/cpu", to: "arborist/engine/model", test: true}, "never a higher one"},
		{edge{from: "arborist/app/serve", to: "arborist/profiles"}, ""},
		{edge{from: "arborist/app", to: "arborist/profiles/jobs"}, ""},
		{edge{from: "arborist/app/cli", to: "arborist/profiles/latency"}, ""},
		{edge{from: "arborist/app/cli", to: "arborist/internal/filekind"}, "a face imports only"},
		{edge{from: "arborist/profiles/jobs", to: "arborist/app"}, "never from core up to face"},
		{edge{from: "arborist", to: "arborist/app/cli"}, ""},
		{edge{from: "arborist/profiles/pairs", to: "arborist/kernels/cpu"}, ""},
		{edge{from: "arborist/engine/hidden", to: "arborist/kernels"}, ""},
		{edge{from: "arborist/engine/gguf", to: "arborist/internal/filekind"}, ""},
		{edge{from: "arborist/profiles/store", to: "arborist/profiles/latency"}, ""},
		{edge{from: "arborist/engine/model/modeltest", to: "arborist/engine/model/modeltest/testfiles"}, ""},
		{edge{from: "arborist/engine/spec", to: "arborist/kernels/cpu", test: true}, ""},
		{edge{from: "arborist/app", to: "arborist/engine/hidden", test: true}, ""},
		{edge{from: "arborist/kernels/cuda", to: "arborist/engine/model", test: true}, ""}, // the listed exception
		{edge{from: "arborist/engine/spec", to: "fmt"}, ""},
	} {
		c.e.file = "x.go"
		exc := map[[2]string]string{}
		if k := [2]string{c.e.from, c.e.to}; testExceptions[k] != "" {
			exc[k] = testExceptions[k]
		}
		got := checkLayers(layers, exc, append(pkgs, "arborist"), []edge{c.e})
		switch {
		case c.rule == "" && len(got) != 0:
			t.Errorf("%s -> %s (test %v) keeps the rules, yet: %q", c.e.from, c.e.to, c.e.test, got)
		case c.rule != "" && (len(got) != 1 || !strings.Contains(got[0], c.rule) || !strings.Contains(got[0], c.e.from+" ") && !strings.Contains(got[0], c.e.from+"'s") || !strings.Contains(got[0], " "+c.e.to+":")):
			t.Errorf("%s -> %s (test %v) breaks %q, reported as %q", c.e.from, c.e.to, c.e.test, c.rule, got)
		}
	}

	// a package the table does not place, and an entry that places no
	// package, an unused exception: each named
	got := checkLayers(layers, testExceptions, append(pkgs, "arborist/engine/newpart"), nil)
	for _, want := range []string{
		"package arborist/engine/newpart is in no layer",
		"the layer table places arborist, which is no package",
		"the test exception arborist/kernels/cuda -> arborist/engine/synth",
	} {
		found := false
		for _, g := range got {
			found = found || strings.Contains(g, want)
		}
		if !found {
			t.Errorf("no %q among %q", want, got)
		}
	}
}
