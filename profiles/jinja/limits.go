package jinja

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Rendering on a leash. A chat template comes from a model file or a
// user's file and runs on every chat request a server answers: a macro
// that calls itself, a loop over a huge range, a string doubled in a loop
// or `content * 100000000` would otherwise take the process down (a stack
// overflow, or memory without bound). Every render runs within Limits;
// one that would pass them stops with an error wrapping ErrLimit, naming
// the bound, before the memory is taken.

// ErrLimit is wrapped by every error of a render that passed its Limits.
var ErrLimit = errors.New("template limit")

// Limits bound one render.
type Limits struct {
	// Depth is the deepest nesting of macro (and caller) calls.
	Depth int
	// Steps are the template nodes and loop iterations a render runs.
	Steps int
	// Output is the largest text a render writes, and the largest
	// string or list (in items) any expression makes.
	Output int
	// Made bounds the bytes of all the strings the render's operators,
	// filters and calls make together (its garbage included).
	Made int64
}

// DefaultLimits are far above what real chat templates take (a few
// hundred steps and a nesting of one or two per message) and far below
// what harms a server.
var DefaultLimits = Limits{Depth: 64, Steps: 1 << 20, Output: 1 << 20, Made: 64 << 20}

// maxRange is the most items range() makes, whatever the limits.
const maxRange = 1 << 20

// budget is one render's account of its Limits, shared by its evaluators.
type budget struct {
	ctx   context.Context
	lim   Limits
	steps int
	depth int
	total int64 // bytes charged
}

func newBudget(ctx context.Context, lim Limits) *budget {
	d := DefaultLimits
	if lim.Depth <= 0 {
		lim.Depth = d.Depth
	}
	if lim.Steps <= 0 {
		lim.Steps = d.Steps
	}
	if lim.Output <= 0 {
		lim.Output = d.Output
	}
	if lim.Made <= 0 {
		lim.Made = max(d.Made, 16*int64(lim.Output))
	}
	return &budget{ctx: ctx, lim: lim}
}

func limitf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrLimit, fmt.Sprintf(format, args...))
}

// step counts a node or a loop iteration; every 4096 it looks at the
// render's context too.
func (b *budget) step() error {
	b.steps++
	if b.steps > b.lim.Steps {
		return limitf("more than %d steps (nodes and loop iterations)", b.lim.Steps)
	}
	if b.steps%4096 == 0 && b.ctx != nil {
		if err := b.ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// enter counts a macro call's nesting; leave ends it.
func (b *budget) enter(name string) error {
	if b.depth >= b.lim.Depth {
		return limitf("macro %s nested more than %d calls deep", name, b.lim.Depth)
	}
	b.depth++
	return nil
}

func (b *budget) leave() { b.depth-- }

// made refuses a string (or output) of n bytes before it is made.
func (b *budget) made(n int64) error {
	if n > int64(b.lim.Output) {
		return limitf("a text of %d bytes, more than %d", n, b.lim.Output)
	}
	return nil
}

// charge counts n bytes an operator, filter or call made, refusing a
// string beyond Output and a sum beyond Made.
func (b *budget) charge(n int64) error {
	if err := b.made(n); err != nil {
		return err
	}
	b.total += n
	if b.total > b.lim.Made {
		return limitf("strings of more than %d bytes in all", b.lim.Made)
	}
	return nil
}

// value checks what an expression made: a string within Output bytes
// (charged to Made), a list within Output items.
func (b *budget) value(v Value, made bool) error {
	switch {
	case v.IsString():
		if made {
			return b.charge(int64(len(v.AsString())))
		}
	case v.IsList():
		if n := v.AsList().Len(); n > b.lim.Output {
			return limitf("a list of %d items, more than %d", n, b.lim.Output)
		}
	}
	return nil
}

// The builtins are free functions without a render's budget: the ones
// whose result can be far larger than their arguments check its size
// first against maxMade (the largest Output a server would give).

// maxMade is the largest string a builtin makes.
const maxMade = 16 << 20

func checkMade(what string, n int64) error {
	if n < 0 || n > maxMade {
		return limitf("%s would make %d bytes, more than %d", what, n, maxMade)
	}
	return nil
}

// replacedSize is the size of strings.Replace(s, old, new, count).
func replacedSize(s, old, new string, count int) int64 {
	n := int64(strings.Count(s, old))
	if old == "" {
		n = int64(utf8.RuneCountInString(s)) + 1
	}
	if count >= 0 && int64(count) < n {
		n = int64(count)
	}
	return int64(len(s)) + n*(int64(len(new))-int64(len(old)))
}
