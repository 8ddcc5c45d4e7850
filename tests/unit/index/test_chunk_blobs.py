"""The blob codec: a store's blobs decoded from several threads at once (queries under the
engine's lock, the writer's prepare without it) come back intact."""

import random
import threading

from daemon.contract import Chunk
from daemon.index.chunk_blobs import FLAG_ZSTD, ZDICT_SAMPLES, BlobCodec, encode_parts


def _chunk(i: int, rng: random.Random) -> Chunk:
    words = ["Процедура", "Если", "Тогда", "КонецЕсли", "Возврат", "Запрос", "Выборка", "Справочник"]
    text = "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(8 + i % 5))
    return Chunk(id=f"m{i}.bsl::М{i}", path=f"m{i}.bsl", kind="procedure", name=f"Метод{i}", text=text)


def test_blobs_decode_intact_from_two_threads_at_once():
    rng = random.Random(7)
    codec = BlobCodec()
    blobs = []
    for i in range(ZDICT_SAMPLES + 200):  # past the samples: the dictionary is trained, zstd from then on
        c = _chunk(i, rng)
        head, raw = encode_parts(c)
        body, flags = codec.compress(raw)
        blobs.append((head + body, len(head), flags, c.text))
    zstd = [b for b in blobs if b[2] & FLAG_ZSTD]
    assert codec.state == "trained" and len(zstd) >= 150
    errors: list[BaseException] = []

    def decode_all() -> None:
        try:
            for _ in range(40):
                for data, head_len, flags, text in zstd:
                    assert codec.decode(data, head_len, flags)[1].text == text
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=decode_all) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
