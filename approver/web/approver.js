// Clearance approval pages: passkey registration and approval ceremonies.
// No third-party code; the server sends WebAuthn options with binary
// members as base64url strings, converted here to and from ArrayBuffers.
(function () {
  'use strict';

  function b64urlToBuffer(s) {
    var b64 = s.replace(/-/g, '+').replace(/_/g, '/');
    while (b64.length % 4) { b64 += '='; }
    var bin = atob(b64);
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { bytes[i] = bin.charCodeAt(i); }
    return bytes.buffer;
  }

  function bufferToB64url(buf) {
    var bytes = new Uint8Array(buf);
    var bin = '';
    for (var i = 0; i < bytes.length; i++) { bin += String.fromCharCode(bytes[i]); }
    return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  function descriptors(list) {
    return (list || []).map(function (d) {
      var out = { type: d.type, id: b64urlToBuffer(d.id) };
      if (d.transports) { out.transports = d.transports; }
      return out;
    });
  }

  async function post(url, body) {
    var res = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store'
    });
    var data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (!res.ok) {
      var err = new Error((data && (data.detail || data.title)) || ('the service answered ' + res.status));
      err.code = data && data.code;
      throw err;
    }
    return data;
  }

  var outcome = document.getElementById('outcome');

  function show(text, kind) {
    outcome.textContent = text;
    outcome.className = 'outcome ' + (kind || '');
  }

  function ceremonyError(e) {
    if (e && e.name === 'NotAllowedError') {
      return 'The passkey ceremony was cancelled or refused (a passkey with PIN, fingerprint or face is required). Nothing was recorded.';
    }
    var msg = (e && e.message ? e.message : String(e)).replace(/[.\s]*$/, '.');
    return 'Refused: ' + msg + ' Nothing was recorded.';
  }

  // Registration (enrollment page).
  var enroll = document.getElementById('enroll');
  if (enroll) {
    var register = document.getElementById('register');
    register.addEventListener('click', async function () {
      register.disabled = true;
      show('Waiting for your passkey…');
      try {
        var options = await post(enroll.dataset.begin, {});
        var pk = options.publicKey;
        pk.challenge = b64urlToBuffer(pk.challenge);
        pk.user.id = b64urlToBuffer(pk.user.id);
        if (pk.excludeCredentials) { pk.excludeCredentials = descriptors(pk.excludeCredentials); }
        var cred = await navigator.credentials.create({ publicKey: pk });
        var response = {
          clientDataJSON: bufferToB64url(cred.response.clientDataJSON),
          attestationObject: bufferToB64url(cred.response.attestationObject)
        };
        if (typeof cred.response.getTransports === 'function') {
          response.transports = cred.response.getTransports();
        }
        await post(enroll.dataset.finish, {
          credential: {
            id: cred.id,
            rawId: bufferToB64url(cred.rawId),
            type: cred.type,
            response: response,
            clientExtensionResults: cred.getClientExtensionResults(),
            authenticatorAttachment: cred.authenticatorAttachment || undefined
          }
        });
        enroll.hidden = true;
        show('Passkey registered. You can close this page.', 'ok');
      } catch (e) {
        register.disabled = false;
        show(ceremonyError(e), 'error');
      }
    });
  }

  // Approval (approval page).
  var decide = document.getElementById('decide');
  if (decide) {
    var buttons = decide.querySelectorAll('button[data-decision]');
    var status = document.getElementById('status');
    var run = async function (decision) {
      buttons.forEach(function (b) { b.disabled = true; });
      show('Waiting for your passkey…');
      try {
        var options = await post(decide.dataset.begin, { decision: decision });
        var pk = options.publicKey;
        pk.challenge = b64urlToBuffer(pk.challenge);
        pk.allowCredentials = descriptors(pk.allowCredentials);
        var cred = await navigator.credentials.get({ publicKey: pk });
        var response = {
          clientDataJSON: bufferToB64url(cred.response.clientDataJSON),
          authenticatorData: bufferToB64url(cred.response.authenticatorData),
          signature: bufferToB64url(cred.response.signature)
        };
        if (cred.response.userHandle) { response.userHandle = bufferToB64url(cred.response.userHandle); }
        var result = await post(decide.dataset.finish, {
          decision: decision,
          assertion: {
            id: cred.id,
            rawId: bufferToB64url(cred.rawId),
            type: cred.type,
            response: response,
            clientExtensionResults: cred.getClientExtensionResults(),
            authenticatorAttachment: cred.authenticatorAttachment || undefined
          }
        });
        decide.hidden = true;
        status.textContent = result.status;
        status.className = 'status status-' + result.status;
        show((result.status === 'APPROVED' ? 'Approved' : 'Denied') + ' by ' + result.approver_id +
          '. The decision is recorded and a sealed receipt was issued.', 'ok');
      } catch (e) {
        if (e && (e.code === 'ALREADY_DECIDED' || e.code === 'REQUEST_EXPIRED' || e.code === 'REQUEST_CANCELLED')) {
          decide.hidden = true;
          show('Refused: ' + e.message.replace(/[.\s]*$/, '.'), 'error');
          return;
        }
        buttons.forEach(function (b) { b.disabled = false; });
        show(ceremonyError(e), 'error');
      }
    };
    buttons.forEach(function (b) {
      b.addEventListener('click', function () { run(b.dataset.decision); });
    });
  }
})();
