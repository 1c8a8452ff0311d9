// Package jinja renders the Jinja chat templates of GGUF models (a
// Jinja2-compatible engine purpose-built for LLM chat templates): a copy of
// github.com/ardanlabs/jinja v1.8.0 (Apache 2.0, LICENSE), kept here so
// that every render runs within bounds (limits.go): macro nesting, steps,
// the size of every string and list it makes and of its output, and a
// context. A template is untrusted input (it comes from a model file or a
// user's file and runs on every chat request of a server); the upstream
// renderer has no such bounds, and a template could crash or exhaust the
// process that renders it.
package jinja
