package nodes

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/docwalk"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// deployDoc runs docs/deploy.md's commands for one path (evaluation or production), in the
// page's order, on the shared clusterset: the first cluster is the registry's, the others
// are the page's member clusters. It runs each command as the page writes it, in bash,
// from a folder that stands for the repository's root, with kubectl's and helm's
// KUBECONFIG set to the cluster the block's mark names (docwalk). What it substitutes, and
// nothing else:
//   - the image: the project image loaded on the nodes, for the page's
//     my-registry.example.com/global-discovery-mcs with the tags dev and dev2 (in the
//     Global Discovery Service's manifest too, as the page says to set it);
//   - the registry's load balancer: mcs-registry.example.internal:9090 is the node port of
//     the Service mcs-registry-grpc on the registry cluster's node (the clusters have no
//     load balancer; a Service of type LoadBalancer gets a node port all the same);
//   - each member cluster's id and region, for use1-a and us-east-1;
//   - the local ports of port-forwards (9091, 8080, 8081) for free ones;
//   - on the production path, DynamoDB: dynoxide on the node bridge, through the AWS SDK's
//     default chain (AWS_ENDPOINT_URL_DYNAMODB and static credentials in the environment
//     of the page's mcs-admin commands and, as registry.extraEnv, of the registry); and the
//     certificate the page asks for (registry.crt, registry.key and ca.crt in the folder),
//     naming mcs-registry.example.internal, mcs-registry.mcs-system.svc and the node's
//     address.
type deployDoc struct {
	path     string
	blocks   []docwalk.Block
	next     int
	clusters []*harness.Cluster
	regions  map[string]string
	dir      string
	env      []string
	ports    map[string]string
	forwards map[string]*forward
	checks   map[string]func(out string) string
	values   string // production: the values file that points the registry at dynoxide
}

// forward is a running background block.
type forward struct {
	body    string
	cluster *harness.Cluster
	cmd     *exec.Cmd
	done    chan struct{}
}

// newDeployDoc prepares the walk of path on clusters; regions overrides the regions the
// page's member clusters get (by default each cluster's clustersetRegions).
func newDeployDoc(t *testing.T, path string, clusters []*harness.Cluster, regions map[string]string) *deployDoc {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := docwalk.ReadFile(filepath.Join(root, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	d := &deployDoc{path: path, blocks: blocks, clusters: clusters, dir: t.TempDir(),
		regions: map[string]string{}, ports: map[string]string{}, forwards: map[string]*forward{}}
	for _, c := range clusters {
		d.regions[c.Name] = clustersetRegions[c.Name]
		if r, ok := regions[c.Name]; ok {
			d.regions[c.Name] = r
		}
	}
	for _, p := range []string{"9091", "8080", "8081"} {
		d.ports[p] = fmt.Sprint(harness.FreePort(t))
	}
	// The folder the commands run in: the repository's bin and charts, the manifest with
	// the image set.
	for _, name := range []string{"bin", "charts"} {
		if err := os.Symlink(filepath.Join(root, name), filepath.Join(d.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	manifest, err := os.ReadFile(filepath.Join(root, "gds-client", "deploy", "global-discovery-service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(d.dir, "gds-client", "deploy", "global-discovery-service.yaml"),
		d.image(string(manifest)))
	harness.Binary(t, "helm")
	harness.Binary(t, "mcs-admin")
	d.env = append(os.Environ(), "PATH="+filepath.Join(root, "bin")+":"+filepath.Join(root, "bin", "k8s")+":"+os.Getenv("PATH"))

	if path == "production" {
		ddb := harness.StartDynamoDBOn(t, harness.HostIP)
		aws := map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": ddb.Endpoint, "AWS_ACCESS_KEY_ID": harness.DynamoDBAccessKey,
			"AWS_SECRET_ACCESS_KEY": harness.DynamoDBSecretKey, "AWS_EC2_METADATA_DISABLED": "true"}
		values := "registry:\n  extraEnv:\n"
		for k, v := range aws {
			d.env = append(d.env, k+"="+v)
			values += fmt.Sprintf("  - {name: %s, value: %q}\n", k, v)
		}
		d.values = filepath.Join(d.dir, "dynamodb-endpoint.yaml")
		writeFile(t, d.values, values)
		ca := harness.NewCA(t, "registry-ca")
		cert, key := ca.IssueServer(t, "registry", []string{"mcs-registry.example.internal", "mcs-registry.mcs-system.svc"},
			[]net.IP{net.ParseIP(clusters[0].Nodes[0].IP)})
		for src, dst := range map[string]string{ca.CertFile: "ca.crt", cert: "registry.crt", key: "registry.key"} {
			raw, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(d.dir, dst), string(raw))
		}
	}
	d.checks = d.newChecks()
	t.Cleanup(d.stopForwards)
	return d
}

// workloads makes what the page's exports need, which a user has before: the Service
// my-dgd-pool-relay of two pods in use1-a and usw2-a (without the export label: the page
// adds it), the Global Router (exported by its label) in use1-a, the namespace dynamo
// everywhere.
func (d *deployDoc) workloads(t *testing.T) {
	t.Helper()
	for _, c := range d.clusters {
		c.Apply(t, harness.DecodeYAML(t, "ns", []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dynamo\n"))...)
	}
	relay := strings.NewReplacer("name: echo", "name: my-dgd-pool-relay", "app: echo", "app: relay")
	for _, c := range d.clusters[:2] {
		c.Apply(t, harness.DecodeYAML(t, "relay", []byte(relay.Replace(fmt.Sprintf(echoWorkload, c.Name, harness.BusyboxImage, ""))))...)
	}
	d.clusters[0].Apply(t, harness.DecodeYAML(t, "router", []byte(fmt.Sprintf(globalRouter, harness.BusyboxImage)))...)
}

// Run runs the path's blocks from where the last Run stopped up to the first block of the
// section named until (to the end for "").
func (d *deployDoc) Run(t *testing.T, until string) {
	t.Helper()
	for ; d.next < len(d.blocks); d.next++ {
		b := d.blocks[d.next]
		if until != "" && b.Section == until {
			return
		}
		if b.Mark == nil || !b.Mark.On(d.path) {
			continue
		}
		for _, c := range d.targets(t, b.Mark.In) {
			d.runBlock(t, b, c)
		}
	}
	if until != "" {
		t.Fatalf("docs/deploy.md has no section %q after the blocks run so far", until)
	}
}

func (d *deployDoc) targets(t *testing.T, in string) []*harness.Cluster {
	t.Helper()
	switch in {
	case "host":
		return []*harness.Cluster{nil}
	case "registry":
		return d.clusters[:1]
	case "members":
		return d.clusters[1:]
	}
	for _, c := range d.clusters {
		if c.Name == in {
			return []*harness.Cluster{c}
		}
	}
	t.Fatalf("docs/deploy.md: in=%s names no cluster of %v", in, d.clusters)
	return nil
}

func (d *deployDoc) runBlock(t *testing.T, b docwalk.Block, c *harness.Cluster) {
	t.Helper()
	body := d.substitute(t, b.Body, c)
	where := "the host"
	if c != nil {
		where = c.Name
	}
	first, _, _ := strings.Cut(strings.TrimSpace(body), "\n")
	t.Logf("docs/deploy.md:%d (%s) in %s: %s", b.Line, b.Section, where, first)
	switch {
	case b.Mark.Apply:
		cmd := exec.Command("kubectl", "--kubeconfig", c.Kubeconfig, "apply", "-f", "-")
		cmd.Env, cmd.Dir, cmd.Stdin = d.env, d.dir, strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docs/deploy.md:%d: kubectl apply in %s: %v\n%s", b.Line, where, err, out)
		}
	case b.Mark.Background:
		d.startForward(t, b.Line, body, c)
	case b.Mark.Check != "":
		check := d.checks[b.Mark.Check]
		if check == nil {
			t.Fatalf("docs/deploy.md:%d: no check named %q", b.Line, b.Mark.Check)
		}
		harness.Eventually(t, fmt.Sprintf("docs/deploy.md:%d in %s passes check %s", b.Line, where, b.Mark.Check), 2*time.Minute, func() string {
			d.keepForwards(t)
			out, err := d.shell(body, c)
			if err != nil {
				return fmt.Sprintf("%v\n%s", err, out)
			}
			if msg := check(out); msg != "" {
				return msg + "\n" + out
			}
			return ""
		})
	default:
		d.keepForwards(t)
		if out, err := d.shell(body, c); err != nil {
			t.Fatalf("docs/deploy.md:%d in %s:\n%s\n: %v\n%s", b.Line, where, body, err, out)
		}
	}
}

// shell runs a block's commands as a user pastes them, stopping at the first that fails.
func (d *deployDoc) shell(body string, c *harness.Cluster) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", body)
	cmd.Dir, cmd.Env = d.dir, d.env
	if c != nil {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+c.Kubeconfig)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var (
	imageRE       = regexp.MustCompile(`image\.tag=dev2?\b`)
	localPortRE   = regexp.MustCompile(`(localhost:|example\.internal:|port-forward \S+ )(\d+)\b`)
	registryURLRE = regexp.MustCompile(`mcs-registry\.example\.internal:9090`)
)

func (d *deployDoc) image(s string) string {
	repo, tag, _ := strings.Cut(harness.ProjectImage, ":")
	s = strings.ReplaceAll(s, "my-registry.example.com/global-discovery-mcs:dev", harness.ProjectImage)
	s = strings.ReplaceAll(s, "my-registry.example.com/global-discovery-mcs", repo)
	return imageRE.ReplaceAllString(s, "image.tag="+tag)
}

// substitute makes a block's commands run here (deployDoc says what it replaces).
func (d *deployDoc) substitute(t *testing.T, body string, c *harness.Cluster) string {
	t.Helper()
	body = d.image(body)
	if registryURLRE.MatchString(body) {
		svc := &corev1.Service{}
		if err := d.clusters[0].Client.Get(context.Background(), client.ObjectKey{Namespace: "mcs-system", Name: "mcs-registry-grpc"}, svc); err != nil {
			t.Fatalf("the registry's load balancer Service: %v", err)
		}
		body = registryURLRE.ReplaceAllString(body, fmt.Sprintf("%s:%d", d.clusters[0].Nodes[0].IP, svc.Spec.Ports[0].NodePort))
	}
	if c != nil {
		body = strings.NewReplacer("controller.clusterId=use1-a", "controller.clusterId="+c.Name,
			"--cluster-id=use1-a", "--cluster-id="+c.Name,
			"controller.region=us-east-1", "controller.region="+d.regions[c.Name]).Replace(body)
	}
	body = localPortRE.ReplaceAllStringFunc(body, func(m string) string {
		sub := localPortRE.FindStringSubmatch(m)
		if p, ok := d.ports[sub[2]]; ok {
			return sub[1] + p
		}
		return m
	})
	if d.values != "" {
		body = strings.ReplaceAll(body, "--set registry.dynamodb.region=us-east-1", "--set registry.dynamodb.region=us-east-1 --values "+d.values)
	}
	return body
}

// startForward starts a background block (a port-forward) and waits until it forwards,
// starting it again while its target is not up yet. One on the same local port stops first.
func (d *deployDoc) startForward(t *testing.T, line int, body string, c *harness.Cluster) {
	t.Helper()
	m := localPortRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("docs/deploy.md:%d: a background block without a local port: %s", line, body)
	}
	if old := d.forwards[m[2]]; old != nil {
		stop(old)
	}
	var f *forward
	harness.Eventually(t, fmt.Sprintf("docs/deploy.md:%d forwards", line), 2*time.Minute, func() string {
		var out string
		f, out = d.forward(body, c)
		if f == nil {
			return out
		}
		return ""
	})
	d.forwards[m[2]] = f
}

// forward runs body until it prints that it forwards; nil and its output when it ended first.
func (d *deployDoc) forward(body string, c *harness.Cluster) (*forward, string) {
	cmd := exec.Command("bash", "-c", body)
	cmd.Dir, cmd.Env = d.dir, append(d.env, "KUBECONFIG="+c.Kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err.Error()
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err.Error()
	}
	f := &forward{body: body, cluster: c, cmd: cmd, done: make(chan struct{})}
	lines := bufio.NewScanner(stdout)
	var out strings.Builder
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "Forwarding from 127.0.0.1:") {
			go func() {
				for lines.Scan() {
				}
				_ = cmd.Wait()
				close(f.done)
			}()
			return f, ""
		}
	}
	_ = cmd.Wait()
	return nil, out.String()
}

// keepForwards starts again a port-forward that ended or no longer answers (its pod went
// away: a registry restart), as a user would before the next command.
func (d *deployDoc) keepForwards(t *testing.T) {
	t.Helper()
	for port, f := range d.forwards {
		select {
		case <-f.done:
			t.Logf("the port-forward on %s ended; starting it again", port)
		default:
			if forwards(port) {
				continue
			}
			t.Logf("the port-forward on %s no longer answers; starting it again", port)
		}
		d.startForward(t, 0, f.body, f.cluster)
	}
}

// forwards reports whether an HTTP request through the local port gets any answer (a
// TLS port answers a plaintext request too, with 400).
func forwards(port string) bool {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return true
}

func (d *deployDoc) stopForwards() {
	for _, f := range d.forwards {
		stop(f)
	}
}

func stop(f *forward) {
	_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-f.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
		<-f.done
	}
}

// newChecks are the named checks of the page's marks: each returns what is missing from
// a command's output, or "".
func (d *deployDoc) newChecks() map[string]func(string) string {
	has := func(out string, want ...string) string {
		for _, w := range want {
			if !strings.Contains(out, w) {
				return "no " + w
			}
		}
		return ""
	}
	podPrefix := func(c *harness.Cluster) string { return `"address":"` + strings.TrimSuffix(c.PodCIDR, "0.0/16") }
	return map[string]func(string) string{
		"ready": func(out string) string {
			if strings.TrimSpace(out) != "ok" {
				return "want ok"
			}
			return ""
		},
		// Every cluster is registered, with its region and an active lease.
		"leases": func(out string) string {
			for _, c := range d.clusters {
				if msg := has(out, `"clusterId":"`+c.Name+`"`, `"region":"`+d.regions[c.Name]+`"`); msg != "" {
					return msg
				}
			}
			if n := strings.Count(out, `"state":"LEASE_STATE_ACTIVE"`); n != len(d.clusters) {
				return fmt.Sprintf("%d clusters LEASE_STATE_ACTIVE, want %d", n, len(d.clusters))
			}
			return ""
		},
		// usw2-a's export is ready, and it imports the Service from both exporting clusters.
		"exported": func(out string) string {
			if msg := has(out, "Valid=True Valid", "Ready=True Ready", "Conflict=False NoConflicts", "service/derived-"); msg != "" {
				return msg
			}
			for _, re := range []string{`(?m)^my-dgd-pool-relay\s+ClusterSetIP\s`, `(?m)my-dgd-pool-relay\s+use1-a\s*$`, `(?m)my-dgd-pool-relay\s+usw2-a\s*$`} {
				if !regexp.MustCompile(re).MatchString(out) {
					return "no line matching " + re
				}
			}
			return ""
		},
		"locality": func(out string) string { return has(out, "policy cluster,region; traffic goes to tier ") },
		// The pool's replicas in both exporting clusters (two each), the Global Router's two
		// in use1-a: /pools, then /routers.
		"pools": func(out string) string {
			if msg := has(out, `"service":"my-dgd-pool-relay"`); msg != "" {
				return msg
			}
			if a, b := strings.Count(out, podPrefix(d.clusters[0])), strings.Count(out, podPrefix(d.clusters[1])); a != 4 || b != 2 {
				return fmt.Sprintf("%d addresses of use1-a's pods (want 2 pool replicas and 2 routers), %d of usw2-a's (want 2 pool replicas)", a, b)
			}
			return ""
		},
		"imports":  func(out string) string { return has(out, `"my-dgd-pool-relay"`, `"use1-a"`, `"usw2-a"`) },
		"describe": func(out string) string { return has(out, "my-dgd-pool-relay", "use1-a", "usw2-a", "euw1-a") },
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
