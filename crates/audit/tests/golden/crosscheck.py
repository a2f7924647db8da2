# An independent implementation of the postern-audit v1 format (Python, pyca/cryptography),
# checked against v1.json: header bytes, sealing, opening and chain hashes. Not run by CI; run it
# by hand with `python3 crates/audit/tests/golden/crosscheck.py` when touching the format docs.
import base64, json, hashlib, os, struct
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
g = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'v1.json')))
sk = X25519PrivateKey.from_private_bytes(bytes.fromhex(g['opening_key_hex']))
R = sk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
assert base64.b64encode(R).decode() == g['recipient_key_base64']
seed = bytes.fromhex(g['rng_seed_hex']); prev = bytes(32)
for i, r in enumerate(g['records']):
    kind = r['kind'].encode()
    hdr = bytes([1]) + struct.pack('>Q', r['seq']) + struct.pack('>q', r['time_ms']) + bytes([len(kind)]) + kind
    assert hdr.hex() == r['header_hex'], i
    e = hashlib.sha256(seed + struct.pack('>Q', i)).digest()
    esk = X25519PrivateKey.from_private_bytes(e)
    E = esk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ss = esk.exchange(X25519PublicKey.from_public_bytes(R))
    okm = HKDF(algorithm=hashes.SHA256(), length=44, salt=E + R, info=b'postern-audit v1 body').derive(ss)
    ct = ChaCha20Poly1305(okm[:32]).encrypt(okm[32:], bytes.fromhex(r['body_hex']), hdr)
    sealed = E + ct
    assert sealed.hex() == r['sealed_body_hex'], i
    # and the opening side, from the recipient's secret
    ss2 = sk.exchange(X25519PublicKey.from_public_bytes(sealed[:32])); assert ss2 == ss
    h = hashlib.sha256(prev + hdr + sealed).digest()
    assert h.hex() == r['chain_hash'], i
    prev = h
assert g['head'] == f"{g['records'][-1]['seq']}:{prev.hex()}"
print("independent implementation agrees on", len(g['records']), "records")
