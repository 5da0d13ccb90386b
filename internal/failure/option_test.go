package failure

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// An OptionError reads with field names, renders with flags, keeps what it
// wraps visible to errors.Is and keeps its exit class; a quoted value that
// looks like a marker is never rewritten.
func TestOptionError(t *testing.T) {
	err := Input(fmt.Errorf("publish: %w", Optionf("{{PrereleaseIndex}} %q is {{IndexDir}} %s: %w", "{{IndexDir}}", "site", fs.ErrExist)))
	if got, want := err.Error(), `publish: PrereleaseIndex "{{IndexDir}}" is IndexDir site: file already exists`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	flag := func(field string) string { return "--" + strings.ToLower(field) }
	if got, want := Render(err, flag), `publish: --prereleaseindex "{{IndexDir}}" is --indexdir site: file already exists`; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrExist) || Code(err) != 2 {
		t.Errorf("errors.Is %v, exit %d", errors.Is(err, fs.ErrExist), Code(err))
	}
	joined := errors.Join(Optionf("{{Release}} is required"), Optionf("{{Chart}} is required"))
	if got := Render(joined, flag); got != "--release is required\n--chart is required" {
		t.Errorf("joined: %q", got)
	}
	plain := errors.New("no options here")
	if Render(plain, flag) != plain.Error() {
		t.Error("an error without options changed")
	}
}
