package profiles

import (
	"context"

	"arborist/profiles/jinja"
)

// chatTemplate is a compiled chat template, rendered within bounds: a
// template is untrusted (a model's metadata, or a user's file) and runs
// on every chat request.
type chatTemplate struct{ t *jinja.Template }

// templateLimits bound one render of a chat template (jinja.Limits).
type templateLimits = jinja.Limits

// defaultTemplateLimits: macro calls 64 deep, 1M steps, 1 MiB of output
// (and of any string or list made), 64 MiB made in all. A server lowers
// Output to what its context can hold.
var defaultTemplateLimits = jinja.DefaultLimits

func compileChatTemplate(src string) (*chatTemplate, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, err
	}
	return &chatTemplate{t: t}, nil
}

// render renders the template with data within lim, stopped when ctx is
// done.
func (c *chatTemplate) render(ctx context.Context, data map[string]any, lim templateLimits) (string, error) {
	return c.t.RenderContext(ctx, data, lim)
}
