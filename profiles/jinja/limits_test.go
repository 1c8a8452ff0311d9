package jinja

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestRenderLimits: templates that would crash or exhaust a server (a
// macro calling itself, a loop over a huge range, a string doubled in a
// loop, a string repeated 100 million times, a replace or join that
// multiplies its input) stop with an error wrapping ErrLimit, quickly and
// within bounded memory; an ordinary chat template renders as before.
func TestRenderLimits(t *testing.T) {
	data := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}, "content": "hello"}
	// the negative control: an ordinary chat template renders whole
	chat := "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}<|assistant|>"
	tp, err := Compile(chat)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tp.Render(data); err != nil || out != "<|user|>hello<|end|><|assistant|>" {
		t.Fatalf("an ordinary template: %q, %v", out, err)
	}
	for _, c := range []struct{ name, src string }{
		{"a macro that calls itself", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"},
		{"a loop over a huge range", "{% for i in range(1000000000) %}x{% endfor %}"},
		{"a huge range made", "{% set r = range(1000000000) %}{{ r | length }}"},
		{"a loop that never ends early", "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}"},
		{"a string doubled in a loop", "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"},
		{"a string doubled by +", "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}"},
		{"content repeated", "{{ content * 100000000 }}"},
		{"content repeated past int32", "{{ content * 10000000000000 }}"},
		{"a replace that multiplies", "{{ (content * 1000) | replace('', content * 1000) }}"},
		{"a string method that multiplies", "{{ (content * 1000).replace('', content * 1000) }}"},
		{"a join that multiplies", "{{ range(100000) | join(content * 1000) }}"},
		{"an indent of a billion", "{{ 'a\nb' | indent(1000000000) }}"},
		{"output without end", "{% for i in range(1000000) %}{{ content * 100 }}{% endfor %}"},
	} {
		tp, err := Compile(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, err := tp.RenderContext(context.Background(), data, Limits{Output: 1 << 20})
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrLimit) || out != "" {
			t.Errorf("%s: %d bytes, %v; want an error wrapping ErrLimit", c.name, len(out), err)
		}
		// everything the render allocated, garbage included
		if made := after.TotalAlloc - before.TotalAlloc; made > 512<<20 {
			t.Errorf("%s: allocated %d MiB", c.name, made>>20)
		}
	}
}

// TestRenderContext: a render stops once its context is done.
func TestRenderContext(t *testing.T) {
	tp, err := Compile("{% for i in range(100000) %}x{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tp.RenderContext(ctx, nil, Limits{Steps: 1 << 30, Output: 1 << 30}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled render: %v", err)
	}
	// the same template within its limits renders whole
	out, err := tp.RenderContext(context.Background(), nil, Limits{Steps: 1 << 20, Output: 1 << 20})
	if err != nil || out != strings.Repeat("x", 100000) {
		t.Fatalf("within limits: %d bytes, %v", len(out), err)
	}
}

// TestRenderNegativeRepeat: a negative repeat makes nothing (Python's
// rule) instead of panicking.
func TestRenderNegativeRepeat(t *testing.T) {
	tp, err := Compile("[{{ 'ab' * -3 }}]")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tp.Render(nil); err != nil || out != "[]" {
		t.Fatalf("%q, %v", out, err)
	}
}
