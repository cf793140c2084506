package version

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestVersionIsSemver(t *testing.T) {
	if !regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`).MatchString(Tag) {
		t.Errorf("Tag %q is not a full semantic version", Tag)
	}
	if !strings.HasPrefix(Describe(), Tag) {
		t.Errorf("Describe() = %q, want it to start with %s", Describe(), Tag)
	}
}

// TestInstallManifestsRunThisRelease: the kustomize install runs the image of this release, so a release is
// a change of internal/version plus this test's failure until the manifests follow.
func TestInstallManifestsRunThisRelease(t *testing.T) {
	b, err := os.ReadFile("../../config/manager/manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	images := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`).FindAllStringSubmatch(string(b), -1)
	if len(images) != 1 || images[0][1] != Image {
		t.Errorf("config/manager/manager.yaml names images %v, want only %s", images, Image)
	}
}

func TestIsRelease(t *testing.T) {
	for image, want := range map[string]bool{
		Image: true,
		"registry.local:5000/mirror/steward:" + Tag: true,
		"steward.local/steward:0123abc":             false,
		"registry.local:5000/steward":               false,
		Repository + "@sha256:0123":                 false,
		Repository + ":" + Tag + "-rc.1":            false,
	} {
		if got := IsRelease(image); got != want {
			t.Errorf("IsRelease(%q) = %v, want %v", image, got, want)
		}
	}
}
