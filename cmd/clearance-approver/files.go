package main

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/clearancehq/clearance/internal/privatefile"
)

// maxSecretsFile bounds what is read from a credentials or keys file.
const maxSecretsFile = 1 << 20

// readPairs reads a file of "org_id secret" lines (blank lines and lines
// starting with # are skipped). The file holds secrets: it must be a
// regular file that group and others can neither read nor write.
func readPairs(path string) ([][2]string, error) {
	data, err := privatefile.Read(path, maxSecretsFile)
	if err != nil {
		return nil, err
	}
	var pairs [][2]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"org_id secret\", found %d fields", path, n, len(fields))
		}
		pairs = append(pairs, [2]string{fields[0], fields[1]})
	}
	return pairs, sc.Err()
}

// readCredentials reads a --credentials-file: Clearance's credentials for
// this service, credential → org id. A credential may appear once.
func readCredentials(path string) (map[string]string, error) {
	pairs, err := readPairs(path)
	if err != nil {
		return nil, err
	}
	creds := map[string]string{}
	for _, p := range pairs {
		if _, dup := creds[p[1]]; dup {
			return nil, fmt.Errorf("%s: a credential appears twice (org %s)", path, p[0])
		}
		creds[p[1]] = p[0]
	}
	if len(creds) == 0 {
		return nil, fmt.Errorf("%s holds no credential", path)
	}
	return creds, nil
}

// readKeys reads a --clearance-keys-file: Clearance API keys for the
// completion hints, org id → key. An org may appear once.
func readKeys(path string) (map[string]string, error) {
	pairs, err := readPairs(path)
	if err != nil {
		return nil, err
	}
	keys := map[string]string{}
	for _, p := range pairs {
		if _, dup := keys[p[0]]; dup {
			return nil, fmt.Errorf("%s: org %s appears twice", path, p[0])
		}
		keys[p[0]] = p[1]
	}
	return keys, nil
}
