package deploytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildImage builds the Dockerfile's final stage with Debian's buildah
// from build-stage.sh's output in dir/out (--build-context replaces the
// builder stage, so no base image is pulled), in a storage of its own,
// and returns the image as an OCI archive.
func buildImage(t *testing.T, buildah, dir string) string {
	t.Helper()
	store := t.TempDir()
	common := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(buildah, append(common, args...)...)
		cmd.Dir = root(t)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("buildah %s: %v\n%s%s", args[0], err, out, stderr.Bytes())
		}
		return out
	}
	run("bud", "--isolation", "chroot", "--build-context", "builder="+dir, "-t", "localhost/firstword:deploytest", ".")
	var img struct {
		OCIv1 struct {
			Config struct {
				User         string
				ExposedPorts map[string]struct{}
				Entrypoint   []string
				Cmd          []string
				WorkingDir   string
			} `json:"config"`
		}
	}
	if err := json.Unmarshal(run("inspect", "--type", "image", "localhost/firstword:deploytest"), &img); err != nil {
		t.Fatal(err)
	}
	c := img.OCIv1.Config
	if _, ok := c.ExposedPorts["8080/tcp"]; c.User != "65532:65532" || !ok || c.WorkingDir != "/data" ||
		strings.Join(c.Entrypoint, " ") != "/usr/local/bin/firstword serve" || strings.Join(c.Cmd, " ") != "--config /etc/firstword/firstword.yaml" {
		t.Errorf("image config = %+v", c)
	}
	archive := filepath.Join(store, "image.tar")
	run("push", "localhost/firstword:deploytest", "oci-archive:"+archive)
	return archive
}

// ociFiles reads an OCI archive's layers and returns each file's header
// and, for regular files, its contents.
func ociFiles(t *testing.T, archive string) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	blobs := map[string][]byte{}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			blobs[h.Name] = b
		}
	}
	blob := func(digest string) []byte {
		b, ok := blobs["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		if !ok {
			t.Fatalf("OCI archive has no blob %s", digest)
		}
		return b
	}
	type descriptor struct{ MediaType, Digest string }
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests", err, len(index.Manifests))
	}
	var manifest struct{ Layers []descriptor }
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	headers, contents := map[string]*tar.Header{}, map[string][]byte{}
	for _, l := range manifest.Layers {
		var r io.Reader = bytes.NewReader(blob(l.Digest))
		if strings.HasSuffix(l.MediaType, "+gzip") {
			zr, err := gzip.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		lr := tar.NewReader(r)
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := "/" + strings.TrimPrefix(strings.TrimSuffix(h.Name, "/"), "./")
			headers[name] = h
			if h.Typeflag == tar.TypeReg {
				if contents[name], err = io.ReadAll(lr); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return headers, contents
}

// checkImage builds the image from the script's output and checks its
// files: the binary is the script's, /data is the user's, and nothing
// else (no shell) is there.
func checkImage(t *testing.T, dir string) {
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		t.Skip("buildah is not installed: the image is not built (Debian's buildah package builds it from the script's output)")
	}
	headers, contents := ociFiles(t, buildImage(t, buildah, dir))
	want, err := os.ReadFile(filepath.Join(dir, "out/rootfs/usr/local/bin/firstword"))
	if err != nil {
		t.Fatal(err)
	}
	if h := headers["/usr/local/bin/firstword"]; h == nil || h.Mode&0o111 == 0 || !bytes.Equal(contents["/usr/local/bin/firstword"], want) {
		t.Errorf("image's /usr/local/bin/firstword: %+v; want the script's binary, executable", h)
	}
	if h := headers["/data"]; h == nil || h.Typeflag != tar.TypeDir || h.Uid != 65532 || h.Gid != 65532 {
		t.Errorf("image's /data: %+v; want a directory of 65532:65532", h)
	}
	if h := headers["/tmp"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode&0o1777 != 0o1777 {
		t.Errorf("image's /tmp: %+v; want a directory of mode 1777", h)
	}
	for _, f := range []string{"/etc/passwd", "/etc/group", "/etc/ssl/certs/ca-certificates.crt"} {
		if headers[f] == nil {
			t.Errorf("image has no %s", f)
		}
	}
	for name := range headers {
		if strings.HasPrefix(name, "/bin") || strings.HasPrefix(name, "/usr/bin") || strings.HasPrefix(name, "/lib") {
			t.Errorf("image has %s; the final stage is the script's output only", name)
		}
	}
}
