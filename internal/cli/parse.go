package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Parse parses args into fs, which must be flag.ContinueOnError, so that
// a mistake costs one line, not the whole usage: a bad flag is returned as
// "flag provided but not defined: -lisen (see kvd -h)" (the caller prints
// it, once), and -h or --help writes the usage to help and returns
// flag.ErrHelp. usage writes the usage to its writer; nil means the flag
// set's defaults under "Usage of NAME:".
func Parse(fs *flag.FlagSet, args []string, help io.Writer, usage func(w io.Writer)) error {
	if usage == nil {
		usage = func(w io.Writer) {
			fmt.Fprintf(w, "Usage of %s:\n", fs.Name())
			fs.SetOutput(w)
			fs.PrintDefaults()
		}
	}
	// The flag package prints the error and the whole usage on a bad flag;
	// silenced here, and the usage printed only when asked for.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		usage(help)
		return err
	}
	return fmt.Errorf("%w (%s)", err, Hint(fs.Name()))
}

// Hint is the pointer to the usage that one-line errors of command name
// end with.
func Hint(name string) string { return "see " + name + " -h" }
