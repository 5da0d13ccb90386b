//go:build tools

// Package deps pins the module set from the design card until real code imports it.
package deps

import (
	_ "github.com/Masterminds/semver/v3"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/google/go-github/v60/github"
	_ "github.com/urfave/cli/v2"
	_ "gopkg.in/yaml.v3"
	_ "helm.sh/helm/v3/pkg/action"
	_ "k8s.io/client-go/kubernetes"
)
