// Package asgtest serves, on a loopback port, the AutoScaling, EC2 and
// instance-metadata calls the asg provider makes, from a group state a test
// controls. AWS cannot be reached from where tests run; this lets them drive
// the real aws-sdk-go-v2 clients (signing, retries, pagination, XML
// decoding) against answers shaped as AWS gives them. It is a test kit: it
// keeps no data beyond the process.
package asgtest

import (
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Instance is one instance of the fake group.
type Instance struct {
	ID        string
	Lifecycle string // InService, Pending, Terminating:Wait, ...
	Health    string // Healthy, Unhealthy
	PrivateIP string
}

// Server is a fake AWS endpoint.
type Server struct {
	URL string

	mu        sync.Mutex
	group     string
	desired   int
	instances []Instance
	throttle  int // answer this many next requests with Throttling
	authFail  bool
	calls     map[string]int
	completed []string // instance ids whose lifecycle action was completed
	srv       *http.Server
	// OnComplete, optional, is called (without the server's lock) when an
	// instance's lifecycle action is completed, before the answer is sent.
	OnComplete func(id string)
	ln         net.Listener
}

// Start serves a group named group on 127.0.0.1.
func Start(group string, desired int, instances ...Instance) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{group: group, desired: desired, instances: instances, calls: map[string]int{}, ln: ln}
	s.URL = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Throttle makes the next n API requests fail with Throttling.
func (s *Server) Throttle(n int) { s.mu.Lock(); s.throttle = n; s.mu.Unlock() }

// FailAuth makes every API request fail with InvalidClientTokenId.
func (s *Server) FailAuth(on bool) { s.mu.Lock(); s.authFail = on; s.mu.Unlock() }

// SetLifecycle sets an instance's lifecycle state.
func (s *Server) SetLifecycle(id, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.instances {
		if s.instances[i].ID == id {
			s.instances[i].Lifecycle = state
		}
	}
}

// Calls returns how often each action was called.
func (s *Server) Calls(action string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls[action] }

// Health returns an instance's health status.
func (s *Server) Health(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances {
		if in.ID == id {
			return in.Health
		}
	}
	return ""
}

// Completed lists the instances whose lifecycle action was completed.
func (s *Server) Completed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.completed...)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Instance metadata service (IMDSv2): a token, then the id. The id is
	// taken from the X-Instance header a test's HTTP client may set, else
	// the first instance.
	if strings.HasPrefix(r.URL.Path, "/latest/") {
		s.imds(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action := r.Form.Get("Action")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[action]++
	ec2Call := action == "DescribeInstances"
	if s.authFail {
		s.fail(w, ec2Call, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
		return
	}
	if s.throttle > 0 {
		s.throttle--
		s.fail(w, ec2Call, http.StatusBadRequest, "Throttling", "Rate exceeded")
		return
	}
	switch action {
	case "DescribeAutoScalingGroups":
		s.describeGroups(w, r)
	case "DescribeInstances":
		s.describeInstances(w, r)
	case "SetInstanceHealth":
		id, health := r.Form.Get("InstanceId"), r.Form.Get("HealthStatus")
		for i := range s.instances {
			if s.instances[i].ID == id {
				s.instances[i].Health = health
			}
		}
		writeXML(w, `<SetInstanceHealthResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></SetInstanceHealthResponse>`)
	case "CompleteLifecycleAction":
		id := r.Form.Get("InstanceId")
		if s.OnComplete != nil {
			s.mu.Unlock()
			s.OnComplete(id)
			s.mu.Lock()
		}
		s.completed = append(s.completed, id)
		writeXML(w, `<CompleteLifecycleActionResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><CompleteLifecycleActionResult/><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></CompleteLifecycleActionResponse>`)
	default:
		s.fail(w, false, http.StatusBadRequest, "InvalidAction", "unsupported action "+action)
	}
}

func (s *Server) imds(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
		fmt.Fprint(w, "token")
	case r.URL.Path == "/latest/meta-data/instance-id":
		id := r.Header.Get("X-Instance")
		s.mu.Lock()
		if id == "" && len(s.instances) > 0 {
			id = s.instances[0].ID
		}
		s.mu.Unlock()
		fmt.Fprint(w, id)
	default:
		http.NotFound(w, r)
	}
}

func writeXML(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprint(w, body)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func (s *Server) fail(w http.ResponseWriter, ec2Call bool, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	if ec2Call {
		fmt.Fprintf(w, `<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>r</RequestID></Response>`, code, esc(msg))
		return
	}
	fmt.Fprintf(w, `<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>r</RequestId></ErrorResponse>`, code, esc(msg))
}

// describeGroups answers in two pages: an unrelated group first (with a
// NextToken), then the requested one, so callers must paginate.
func (s *Server) describeGroups(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	b.WriteString(`<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><DescribeAutoScalingGroupsResult><AutoScalingGroups>`)
	if r.Form.Get("NextToken") == "" {
		b.WriteString(`<member><AutoScalingGroupName>other-group</AutoScalingGroupName><DesiredCapacity>1</DesiredCapacity><MinSize>0</MinSize><MaxSize>1</MaxSize><Instances></Instances></member>`)
		b.WriteString(`</AutoScalingGroups><NextToken>page2</NextToken></DescribeAutoScalingGroupsResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeAutoScalingGroupsResponse>`)
		writeXML(w, b.String())
		return
	}
	if r.Form.Get("AutoScalingGroupNames.member.1") == s.group {
		fmt.Fprintf(&b, `<member><AutoScalingGroupName>%s</AutoScalingGroupName><DesiredCapacity>%d</DesiredCapacity><MinSize>0</MinSize><MaxSize>9</MaxSize><Instances>`, esc(s.group), s.desired)
		for _, in := range s.instances {
			fmt.Fprintf(&b, `<member><InstanceId>%s</InstanceId><LifecycleState>%s</LifecycleState><HealthStatus>%s</HealthStatus><AvailabilityZone>local-1a</AvailabilityZone><ProtectedFromScaleIn>false</ProtectedFromScaleIn></member>`, esc(in.ID), esc(in.Lifecycle), esc(in.Health))
		}
		b.WriteString(`</Instances></member>`)
	}
	b.WriteString(`</AutoScalingGroups></DescribeAutoScalingGroupsResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeAutoScalingGroupsResponse>`)
	writeXML(w, b.String())
}

// describeInstances answers one reservation per page.
func (s *Server) describeInstances(w http.ResponseWriter, r *http.Request) {
	want := map[string]bool{}
	for k, v := range r.Form {
		if strings.HasPrefix(k, "InstanceId.") && len(v) > 0 {
			want[v[0]] = true
		}
	}
	var matched []Instance
	for _, in := range s.instances {
		if want[in.ID] {
			matched = append(matched, in)
		}
	}
	page, _ := strconv.Atoi(r.Form.Get("NextToken"))
	var b strings.Builder
	b.WriteString(`<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><reservationSet>`)
	if page < len(matched) {
		in := matched[page]
		fmt.Fprintf(&b, `<item><reservationId>r-%d</reservationId><instancesSet><item><instanceId>%s</instanceId><privateIpAddress>%s</privateIpAddress><instanceState><code>16</code><name>running</name></instanceState></item></instancesSet></item>`, page, esc(in.ID), esc(in.PrivateIP))
	}
	b.WriteString(`</reservationSet>`)
	if page+1 < len(matched) {
		fmt.Fprintf(&b, `<nextToken>%d</nextToken>`, page+1)
	}
	b.WriteString(`</DescribeInstancesResponse>`)
	writeXML(w, b.String())
}

// Add puts an instance into the group.
func (s *Server) Add(in Instance) { s.mu.Lock(); s.instances = append(s.instances, in); s.mu.Unlock() }

// Remove takes an instance out of the group.
func (s *Server) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.instances[:0]
	for _, in := range s.instances {
		if in.ID != id {
			out = append(out, in)
		}
	}
	s.instances = out
}
