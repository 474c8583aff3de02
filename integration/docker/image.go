package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/moby/moby/client"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

// The Docker backend runs a local image holding the host's redis-server and
// the shared libraries ldd lists for it, FROM scratch: there may be no
// registry to pull from. build-image.sh builds the same image from a
// shell; this file builds it through the Docker API when it is missing, so
// that go test works on a machine with Docker and redis-server only.

// imageRepo is the repository of the local image; its tag is
// "<redis version>-local".
const imageRepo = "rlock-redis"

// imageFiles are copied into the image when present, with their libraries,
// for Options.ClockRate.
var imageFiles = slices.Concat(backendkit.LibfaketimePaths, backendkit.MallocDebugPaths)

var (
	imageMu    sync.Mutex
	imageReady string // the tag once it is known to exist
)

// imageTag is the tag for the host's redis-server.
func imageTag(ctx context.Context) (string, error) {
	bin, err := exec.LookPath(backendkit.RedisServerBin)
	if err != nil {
		return "", integration.Unavailable(integration.BackendDocker, "no image and no %s on PATH to build it from: %w", backendkit.RedisServerBin, err)
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("rlock: integration: %s --version: %w", bin, err)
	}
	m := regexp.MustCompile(`v=([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("rlock: integration: no version in %q", out)
	}
	return fmt.Sprintf("%s:%s-local", imageRepo, m[1]), nil
}

// ensureImage returns the local image's tag, building the image first when
// the daemon does not have it. It never pulls.
func ensureImage(ctx context.Context, cli *client.Client) (string, error) {
	imageMu.Lock()
	defer imageMu.Unlock()
	if imageReady != "" {
		return imageReady, nil
	}
	tag, err := imageTag(ctx)
	if err != nil {
		return "", err
	}
	list, err := cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", tag)})
	if err != nil {
		return "", fmt.Errorf("rlock: integration: list images: %w", err)
	}
	if len(list.Items) == 0 {
		if err := buildImage(ctx, cli, tag); err != nil {
			return "", err
		}
	}
	imageReady = tag
	return tag, nil
}

const dockerfile = `FROM scratch
COPY rootfs/ /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/bin/redis-server"]
`

// buildImage builds tag from a context made of the Dockerfile and a rootfs
// of redis-server, the extra files and everything ldd lists for them.
func buildImage(ctx context.Context, cli *client.Client, tag string) error {
	bin, err := exec.LookPath(backendkit.RedisServerBin)
	if err != nil {
		return integration.Unavailable(integration.BackendDocker, "%s not on PATH: %w", backendkit.RedisServerBin, err)
	}
	files := map[string]string{"/usr/bin/redis-server": bin} // image path: host path
	roots := []string{bin}
	for _, f := range imageFiles {
		if _, err := os.Stat(f); err == nil {
			roots = append(roots, f)
			files[f] = f
		}
	}
	for _, r := range roots {
		libs, err := lddLibs(ctx, r)
		if err != nil {
			return err
		}
		for _, l := range libs {
			files[l] = l
		}
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tarBytes(tw, "Dockerfile", []byte(dockerfile), 0o644); err != nil {
		return err
	}
	for _, dir := range []string{"rootfs/data/", "rootfs/tmp/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o1777}); err != nil {
			return fmt.Errorf("rlock: integration: image context: %w", err)
		}
	}
	for _, in := range slices.Sorted(maps.Keys(files)) {
		b, err := os.ReadFile(files[in]) // follows symlinks
		if err != nil {
			return fmt.Errorf("rlock: integration: image context: %w", err)
		}
		if err := tarBytes(tw, "rootfs"+in, b, 0o755); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("rlock: integration: image context: %w", err)
	}

	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags:        []string{tag},
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{labelKind: "image"},
	})
	if err != nil {
		return fmt.Errorf("rlock: integration: build image %s: %w", tag, err)
	}
	defer res.Body.Close()
	return buildResult(res.Body, tag)
}

// buildResult reads the build's JSON message stream to its end and returns
// the error it reports, if any.
func buildResult(r io.Reader, tag string) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("rlock: integration: build image %s: %w", tag, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("rlock: integration: build image %s: %s", tag, msg.Error)
		}
	}
}

func tarBytes(tw *tar.Writer, name string, b []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(b))}); err != nil {
		return fmt.Errorf("rlock: integration: image context: %w", err)
	}
	if _, err := tw.Write(b); err != nil {
		return fmt.Errorf("rlock: integration: image context: %w", err)
	}
	return nil
}

// lddLibs lists the absolute paths of the shared libraries ldd names for
// bin, the dynamic loader included.
func lddLibs(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		return nil, integration.Unavailable(integration.BackendDocker, "ldd %s: %w", bin, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2]) // libc.so.6 => /lib/.../libc.so.6 (0x...)
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0]) // /lib64/ld-linux-x86-64.so.2 (0x...)
		}
	}
	return libs, sc.Err()
}
