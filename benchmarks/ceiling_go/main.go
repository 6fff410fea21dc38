// Command ceiling binds pods with no scheduling logic at all, through client-go, to measure
// what the control plane can take when no Python client stands in the way. It lists and
// watches the unscheduled pods of one schedulerName and POSTs their Bindings round-robin over
// the selected nodes, at most --concurrency at a time (ascheduler's binding-cycle bound), over
// client-go's HTTP/2 transport with protobuf and no client-side rate limit. A pod with
// ResourceClaims gets what a scheduler must write for them first (claims.go).
//
// Its requests are counted as rest_client_requests_total{method,code} and served in the
// Prometheus text format on --metrics-port, like the schedulers' own. SIGTERM stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// requestCounts is rest_client_requests_total, by method and code.
type requestCounts struct {
	mu     sync.Mutex
	counts map[[2]string]uint64
}

func (c *requestCounts) add(method, code string) {
	c.mu.Lock()
	c.counts[[2]string{method, code}]++
	c.mu.Unlock()
}

func (c *requestCounts) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	keys := make([][2]string, 0, len(c.counts))
	for k := range c.counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1]
	})
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# HELP rest_client_requests_total Number of HTTP requests, by method and code.")
	fmt.Fprintln(w, "# TYPE rest_client_requests_total counter")
	for _, k := range keys {
		fmt.Fprintf(w, "rest_client_requests_total{code=%q,method=%q} %d\n", k[1], k[0], c.counts[k])
	}
	c.mu.Unlock()
}

type countingTransport struct {
	next   http.RoundTripper
	counts *requestCounts
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	code := "<error>"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.counts.add(r.Method, code)
	return resp, err
}

type ceiling struct {
	client   kubernetes.Interface
	selector string
	nodes    []string
	next     int
	gate     chan struct{}
	sent     map[types.UID]bool
	inFlight sync.WaitGroup
	claims   *claimWriter // started on the first pod with claims
}

func (c *ceiling) run(ctx context.Context) {
	pods := c.client.CoreV1().Pods("")
	timeout := int64(300)
	for ctx.Err() == nil {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: c.selector})
		if err != nil {
			fmt.Fprintf(os.Stderr, "ceiling: list failed, again: %v\n", err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		// The watch opens at once and its events are read while the listed pods are bound, as
		// a scheduler's informer does: the events its own binds make are then read (and paid
		// for, by the API server) while it binds. Bound first and watched after, a backlog's
		// events would all come after its last bind, outside the span a run measures.
		w, err := pods.Watch(ctx, metav1.ListOptions{
			FieldSelector:   c.selector,
			ResourceVersion: list.ResourceVersion,
			TimeoutSeconds:  &timeout,
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "ceiling: watch failed, listing again: %v\n", err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		added := make(chan *corev1.Pod, 1024)
		go func() {
			defer close(added)
			for event := range w.ResultChan() {
				if event.Type == watch.Error {
					fmt.Fprintf(os.Stderr, "ceiling: watch ended: %v\n", event.Object)
					return
				}
				// A pod whose claims its status names only later comes again as Modified.
				pod, ok := event.Object.(*corev1.Pod)
				if ok && (event.Type == watch.Added || event.Type == watch.Modified) {
					added <- pod
				}
			}
		}()
		for i := range list.Items {
			c.dispatch(ctx, &list.Items[i])
		}
		for pod := range added {
			c.dispatch(ctx, pod)
		}
		w.Stop()
	}
}

// dispatch starts the pod's bind once a slot is free; only run's loop calls it.
func (c *ceiling) dispatch(ctx context.Context, pod *corev1.Pod) {
	if c.sent[pod.UID] {
		return
	}
	names, named := claimNames(pod)
	if !named { // a claim of a template not made yet: the pod comes again
		return
	}
	c.sent[pod.UID] = true
	if len(names) > 0 && c.claims == nil {
		claims, err := startClaims(ctx, c.client, c.nodes)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ceiling: %v\n", err)
			delete(c.sent, pod.UID) // the next listing has it again
			return
		}
		c.claims = claims
	}
	var node string
	if len(names) == 0 {
		node = c.nodes[c.next%len(c.nodes)]
		c.next++
	}
	select {
	case c.gate <- struct{}{}:
	case <-ctx.Done():
		return
	}
	c.inFlight.Add(1)
	go func() {
		defer func() { <-c.gate; c.inFlight.Done() }()
		// Placed here, not in run's loop: a claim not made yet holds up this pod alone.
		if len(names) > 0 {
			p, ok := c.claims.place(ctx, pod, names)
			if !ok {
				fmt.Fprintf(os.Stderr, "ceiling: %s/%s: no node has its devices free\n", pod.Namespace, pod.Name)
				return
			}
			if err := c.claims.write(ctx, pod, p); err != nil {
				fmt.Fprintf(os.Stderr, "ceiling: %s/%s: claims: %v\n", pod.Namespace, pod.Name, err)
				return
			}
			node = p.node
		}
		c.bind(ctx, pod, node)
	}()
}

func (c *ceiling) bind(ctx context.Context, pod *corev1.Pod, node string) {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	for attempt := 0; ; attempt++ {
		err := c.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
		if err == nil {
			return
		}
		// Transient failures only are retried; a 409 means it is bound, a 404 that it is gone.
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || attempt == 4 || ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "ceiling: %s/%s: %v\n", pod.Namespace, pod.Name, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the cluster's kubeconfig")
	schedulerName := flag.String("scheduler-name", "", "bind the pods that name this scheduler")
	concurrency := flag.Int("concurrency", 256, "Bindings in flight at most")
	nodeSelector := flag.String("node-selector", "", "bind only to the nodes this label selector selects")
	metricsPort := flag.Int("metrics-port", 0, "serve /metrics on 127.0.0.1 here; 0: not at all")
	flag.Parse()
	if *kubeconfig == "" || *schedulerName == "" {
		fmt.Fprintln(os.Stderr, "ceiling: --kubeconfig and --scheduler-name are required")
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ceiling: %v\n", err)
		os.Exit(2)
	}
	counts := &requestCounts{counts: map[[2]string]uint64{}}
	config.QPS = -1 // no client-side rate limiter
	config.ContentType = "application/vnd.kubernetes.protobuf"
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	config.UserAgent = "ceiling-go"
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &countingTransport{next: rt, counts: counts}
	})
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ceiling: %v\n", err)
		os.Exit(2)
	}
	if *metricsPort != 0 {
		listener, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*metricsPort)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "ceiling: metrics: %v\n", err)
			os.Exit(2)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", counts)
		go func() { _ = http.Serve(listener, mux) }()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: *nodeSelector})
	if err != nil {
		fmt.Fprintf(os.Stderr, "ceiling: listing nodes: %v\n", err)
		os.Exit(1)
	}
	if len(nodes.Items) == 0 {
		fmt.Fprintln(os.Stderr, "ceiling: no nodes")
		os.Exit(1)
	}
	c := &ceiling{
		client:   client,
		selector: "spec.schedulerName=" + *schedulerName + ",spec.nodeName=",
		gate:     make(chan struct{}, *concurrency),
		sent:     map[types.UID]bool{},
	}
	for _, n := range nodes.Items {
		c.nodes = append(c.nodes, n.Name)
	}
	c.run(ctx)
	c.inFlight.Wait()
}
