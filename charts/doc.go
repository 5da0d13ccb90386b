// Package charts holds no code: its tests render the Helm charts in this
// folder (chartpin-lib, example, testdata/adopter) with the Helm SDK.
package charts
