package yamledit_test

import (
	"fmt"

	"github.com/chartpin/chartpin/yamledit"
)

func ExampleFile_Apply() {
	data := []byte("images:\n  ingestor:\n    repository: ghcr.io/example/ingestor # the app\n    prodDigest: \"\" # pinned at release\n")
	f, err := yamledit.Parse("values.yaml", data)
	if err != nil {
		panic(err)
	}
	s, err := f.Get("images.ingestor.prodDigest")
	if err != nil {
		panic(err)
	}
	out, err := f.Apply(yamledit.Edit{Node: s.Node, Value: "sha256:05e12494"})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s:%d %q\n%s", f.Name, s.Line, data[s.Start:s.End], out)
	// Output:
	// values.yaml:4 "\"\""
	// images:
	//   ingestor:
	//     repository: ghcr.io/example/ingestor # the app
	//     prodDigest: "sha256:05e12494" # pinned at release
}
