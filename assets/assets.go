// Package assets holds the files embedded in the Arborist binary: the
// application icon and the built-in prompt suites.
package assets

import _ "embed"

// Icon is the application icon (256x256 PNG).
//
//go:embed icon.png
var Icon []byte

// DemoModel is stories260K (MIT, tinyllamas; see demo/NOTICE), the source of
// the built-in demo pair that engine/demo expands.
//
//go:embed demo/stories260K.gguf
var DemoModel []byte

// DemoNotice is the licence notice of DemoModel.
//
//go:embed demo/NOTICE
var DemoNotice string
