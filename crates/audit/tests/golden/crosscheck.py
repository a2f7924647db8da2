# An independent implementation of the postern-audit formats (Python, pyca/cryptography),
# checked against v1.json and v2.json: header bytes, sealing, opening and chain hashes. Not run
# by CI; run it by hand with `python3 crates/audit/tests/golden/crosscheck.py` when touching the
# format docs. v1: a fresh ephemeral key per record. v2: one per run of records (v2.json: records
# 1-3, then 4-5), and the record's sequence number appended to the HKDF info.
import base64, json, hashlib, os, struct
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

RAW = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def check(version, run_of):
    g = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f'v{version}.json')))
    sk = X25519PrivateKey.from_private_bytes(bytes.fromhex(g['opening_key_hex']))
    R = sk.public_key().public_bytes(*RAW)
    assert base64.b64encode(R).decode() == g['recipient_key_base64']
    seed = bytes.fromhex(g['rng_seed_hex']); prev = bytes(32)
    for i, r in enumerate(g['records']):
        kind = r['kind'].encode()
        hdr = bytes([version]) + struct.pack('>Q', r['seq']) + struct.pack('>q', r['time_ms']) + bytes([len(kind)]) + kind
        assert hdr.hex() == r['header_hex'], i
        e = hashlib.sha256(seed + struct.pack('>Q', run_of(i))).digest()
        esk = X25519PrivateKey.from_private_bytes(e)
        E = esk.public_key().public_bytes(*RAW)
        ss = esk.exchange(X25519PublicKey.from_public_bytes(R))
        info = b'postern-audit v1 body' if version == 1 else b'postern-audit v2 body' + struct.pack('>Q', r['seq'])
        okm = HKDF(algorithm=hashes.SHA256(), length=44, salt=E + R, info=info).derive(ss)
        ct = ChaCha20Poly1305(okm[:32]).encrypt(okm[32:], bytes.fromhex(r['body_hex']), hdr)
        sealed = E + ct
        assert sealed.hex() == r['sealed_body_hex'], i
        # and the opening side, from the recipient's secret
        ss2 = sk.exchange(X25519PublicKey.from_public_bytes(sealed[:32])); assert ss2 == ss
        h = hashlib.sha256(prev + hdr + sealed).digest()
        assert h.hex() == r['chain_hash'], i
        prev = h
    assert g['head'] == f"{g['records'][-1]['seq']}:{prev.hex()}"
    print(f"independent implementation agrees on the {len(g['records'])} records of v{version}.json")


check(1, lambda i: i)
check(2, lambda i: i // 3)
