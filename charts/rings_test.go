package charts_test

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
)

// upgradeArgs renders the example with values and returns the auto-upgrade
// CronJob's chartpin arguments.
func upgradeArgs(t *testing.T, values ...string) []string {
	t.Helper()
	r := render(t, releaseNs, append([]string{unpinned}, values...)...)
	o, ok := find(r.objs, "CronJob", releaseNs, "rel-example-upgrade")
	if !ok {
		t.Fatalf("no auto-upgrade CronJob in %v", keys(r.objs))
	}
	var cj batchv1.CronJob
	o.into(t, &cj)
	return cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
}

// Each ring waits ring x ringSoak before taking a version; ring 0 (the
// canaries) passes no --min-age at all; an explicit minAge wins over the ring.
func TestAutoUpgradeRings(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   string // the --min-age argument, "" for none
	}{
		{`autoUpgrade: {ring: 0}`, ""},
		{`autoUpgrade: {ring: 1}`, "--min-age=86400s"},
		{`autoUpgrade: {ring: 2}`, "--min-age=172800s"},
		{`autoUpgrade: {ring: 2, ringSoak: 6h}`, "--min-age=43200s"},
		{`autoUpgrade: {ring: 1, minAge: 36h}`, "--min-age=129600s"},
		{`autoUpgrade: {minAge: 90m}`, "--min-age=5400s"},
	} {
		args := upgradeArgs(t, tc.values)
		var got []string
		for _, a := range args {
			if strings.HasPrefix(a, "--min-age") {
				got = append(got, a)
			}
		}
		want := []string{}
		if tc.want != "" {
			want = append(want, tc.want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: --min-age args %v, want %v (all args %v)", tc.values, got, want, args)
		}
	}
}

// A ring or soak the schema would refuse is refused by the library itself
// too, naming the key.
func TestAutoUpgradeRingGuards(t *testing.T) {
	c := loadExample(t)
	for _, tc := range []struct{ values, schemaWant string }{
		{`autoUpgrade: {ring: 10}`, "/autoUpgrade/ring"},
		{`autoUpgrade: {ring: -1}`, "/autoUpgrade/ring"},
		{`autoUpgrade: {ring: "1"}`, "/autoUpgrade/ring"},
		{`autoUpgrade: {minAge: "1 day"}`, "/autoUpgrade/minAge"},
		{`autoUpgrade: {ring: 1, ringSoak: 0s}`, "/autoUpgrade/ringSoak"},
	} {
		if _, _, err := installDryRun(c, releaseNs, parseValues(t, unpinned, tc.values)); err == nil || !strings.Contains(err.Error(), tc.schemaWant) {
			t.Errorf("schema: values %s: error %v, want one naming %s", tc.values, err, tc.schemaWant)
		}
	}
	c.Schema = nil
	for _, tc := range []struct{ values, want string }{
		{`autoUpgrade: {ring: 10}`, "chartpin: autoUpgrade.ring 10 is not a ring from 0 (canaries, no soak) to 9"},
		{`autoUpgrade: {minAge: "1 day"}`, `chartpin: autoUpgrade.minAge "1 day" is not a positive duration`},
		{`autoUpgrade: {ring: 1, ringSoak: 0s}`, `chartpin: autoUpgrade.ringSoak "0s" is not a positive duration`},
	} {
		if _, _, err := installDryRun(c, releaseNs, parseValues(t, unpinned, tc.values)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("template guard: values %s: error %v, want %q", tc.values, err, tc.want)
		}
	}
}
