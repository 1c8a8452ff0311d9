package profiles

import (
	"context"
	"errors"

	"arborist/profiles/config"
	"arborist/profiles/llamacpp"
)

// LlamaCppFlagsRelease is the llama.cpp release the exported llama.cpp
// flags are written for (they hold for it and later ones): not the
// user's build, which LlamaCppBuild reads.
const LlamaCppFlagsRelease = config.LlamaCppVersion

// LlamaCppBuild is the version the llama.cpp build in dir (PATH when "")
// prints for --version, e.g. "4748 (3ac1a5f)": what the exported flags
// would run on. "" with a nil error when its program prints no version;
// llamacpp.ErrNotFound when there is no build there.
func LlamaCppBuild(ctx context.Context, dir string) (string, error) {
	plain, _, err := llamacpp.Programs(dir)
	if plain == "" {
		if err == nil {
			err = errors.New("llama.cpp: no program found")
		}
		return "", err
	}
	return llamacpp.Version(ctx, plain, 0)
}
