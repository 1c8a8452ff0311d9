package profiles

import (
	"context"

	"arborist/assets"
	"arborist/engine/demo"
)

// DemoNotice is the licence notice of the model the demo pair is built from.
var DemoNotice = assets.DemoNotice

// WriteDemoPair writes Arborist's built-in demo pair into dir and returns
// the target's and the drafter's paths. The pair is built from stories260K,
// embedded in the binary (engine/demo explains the construction): a
// 35M-parameter Q8_0 target that writes real TinyStories text and a noisy
// copy of the small model as its drafter, so speculation visibly pays. Both
// faces (the Models screen and `arborist demo`) build it here.
func WriteDemoPair(ctx context.Context, dir string) (target, draft string, err error) {
	return demo.Write(ctx, assets.DemoModel, dir, demo.Options{})
}
