"""Dense text samples for CTX-24: the classes of text a token estimator is most likely to
under-count, each a few hundred characters, made the same way on every machine.

Prose in Chinese, Japanese, Korean and Russian is written here by hand (everyday
paragraphs about a support ticket, a trip, a recipe: the shape of a real chat); machine
text -- digit strings, number tables, hex digests, hex dumps, base64, UUIDs -- is made
from a seeded generator, so the committed counts (``data/dense_counts.json``) stay the
counts of exactly these strings. Mixed code and English is the control: the class the
o200k proxy was measured on before.
"""
from __future__ import annotations

import base64
import hashlib
import random
import uuid

# The classes the estimator counts per character, and the control.
CLASSES = ("chinese", "japanese", "korean", "russian", "digits", "numbers", "hex", "base64", "uuid", "code_english")

CHINESE = (
    "您好，我们已经收到您关于订单延迟发货的反馈。经过核实，您的包裹目前在上海转运中心，由于最近的暴雨天气，"
    "部分线路暂停运输，预计会比原定时间晚两到三天送达。给您带来的不便，我们深表歉意。如果您希望取消订单，"
    "可以在订单详情页面点击申请退款，系统会在二十四小时内处理完毕，款项将原路退回到您的支付账户。",
    "昨天下午我们去了西湖，沿着苏堤慢慢地走了一圈。湖面上有很多游船，远处的雷峰塔在夕阳下显得格外美丽。"
    "晚饭在一家老字号餐馆吃了东坡肉和龙井虾仁，味道非常地道。服务员告诉我们，明天早上去灵隐寺最好早一点出发，"
    "因为周末的游客特别多，九点以后排队可能要等一个多小时。",
    "这个函数的问题在于它没有处理空列表的情况。当输入为空时，程序会尝试访问第一个元素，从而抛出索引越界的异常。"
    "建议在函数开头增加一个判断，如果列表为空就直接返回默认值。另外，循环里面每次都重新计算长度，效率比较低，"
    "可以先把长度保存在一个局部变量里。修改之后请重新运行单元测试，确认所有用例都能通过。",
)
JAPANESE = (
    "お問い合わせいただきありがとうございます。ご注文の商品は本日午後に発送いたしました。配送状況は、"
    "マイページの注文履歴からご確認いただけます。なお、離島や一部地域では到着までにさらに二日ほどかかる場合が"
    "ございますので、あらかじめご了承ください。ご不明な点がございましたら、お気軽にカスタマーサポートまでご連絡ください。",
    "週末は友達と京都へ行きました。朝早く清水寺に着いたので、人も少なくて静かな雰囲気を楽しめました。"
    "そのあと祇園のあたりを散歩して、小さな喫茶店で抹茶パフェを食べました。午後は嵐山まで電車で移動し、"
    "竹林の小道を歩きました。夕方には雨が降り始めましたが、とても充実した一日でした。",
    "このエラーは、設定ファイルの読み込みに失敗したときに発生します。まず、環境変数で指定されたパスが正しいかどうかを"
    "確認してください。次に、ファイルの文字コードがUTF-8になっているか、余計な空白やタブが含まれていないかを調べてください。"
    "それでも解決しない場合は、ログの出力レベルをデバッグに変更して、もう一度実行してみてください。",
)
KOREAN = (
    "안녕하세요. 문의하신 주문 건은 현재 배송 준비 중이며, 내일 오전 중으로 출고될 예정입니다. 배송이 시작되면 "
    "문자 메시지로 운송장 번호를 보내 드리겠습니다. "
    "주소 변경을 원하시면 출고 전까지 고객센터로 연락해 주시기 바랍니다. "
    "이용해 주셔서 감사합니다. 앞으로도 더 나은 서비스를 제공하기 위해 노력하겠습니다.",
    "지난 주말에 가족과 함께 부산에 다녀왔습니다. "
    "해운대 해수욕장에서 산책을 하고, 자갈치 시장에서 싱싱한 회를 먹었습니다. "
    "저녁에는 광안대교의 야경을 보러 갔는데, 불빛이 바다에 비쳐서 정말 아름다웠습니다. 다음에는 감천 문화 마을과 "
    "태종대에도 꼭 가 보고 싶습니다.",
    "이 오류는 데이터베이스 연결이 시간 초과되었을 때 발생합니다. 먼저 서버가 실행 중인지 확인하고, 방화벽 설정에서 "
    "해당 포트가 열려 있는지 점검해 주세요. 연결 풀의 최대 크기가 너무 작으면 요청이 많을 때 대기 시간이 길어질 수 "
    "있으므로, 설정 값을 조금 늘려 보는 것도 좋습니다.",
)
RUSSIAN = (
    "Здравствуйте! Мы получили ваше обращение по поводу задержки доставки. Ваша посылка сейчас находится на "
    "сортировочном пункте в Екатеринбурге и будет передана курьеру в течение двух рабочих дней. Приносим извинения "
    "за неудобства. Если вы хотите отменить заказ, напишите нам, и мы вернём деньги на вашу карту.",
    "Эта ошибка возникает, когда программа не может открыть файл настроек. Проверьте, что путь указан правильно и у "
    "пользователя есть права на чтение. Если файл на месте, включите подробный журнал и запустите команду ещё раз: "
    "в выводе будет видно, на каком шаге происходит сбой.",
)
CODE_ENGLISH = (
    "def retry(fn, attempts=3, delay=0.5):\n    \"\"\"Call fn until it succeeds or attempts run out.\"\"\"\n"
    "    for attempt in range(attempts):\n        try:\n            return fn()\n        except TimeoutError:\n"
    "            if attempt == attempts - 1:\n                raise\n            time.sleep(delay * 2 ** attempt)\n",
    "The deployment failed because the worker could not reach the database. After restarting the container the "
    "health check passed, but requests still timed out for a few minutes while the connection pool warmed up. "
    "We should add a readiness probe so traffic only arrives once the pool is ready.",
    "SELECT customer_id, COUNT(*) AS orders, SUM(total) AS revenue\nFROM orders\nWHERE created_at >= '2024-01-01'\n"
    "GROUP BY customer_id\nHAVING COUNT(*) > 5\nORDER BY revenue DESC\nLIMIT 20;\n",
)


def _machine(kind: str, rng: random.Random) -> str:
    if kind == "digits":  # long digit strings: ids, phone numbers, account numbers
        return " ".join("".join(rng.choice("0123456789") for _ in range(rng.randint(6, 24))) for _ in range(20))
    if kind == "numbers":  # a table of measurements, the way tool results print them
        rows = [", ".join(f"{rng.uniform(0, 100_000):.{rng.randint(0, 4)}f}" for _ in range(6)) for _ in range(8)]
        return "\n".join(rows)
    if kind == "hex":  # digests and a hex dump
        digests = " ".join(hashlib.sha256(rng.randbytes(16)).hexdigest() for _ in range(4))
        dump = "\n".join(f"{i * 16:08x}  " + " ".join(f"{b:02x}" for b in rng.randbytes(16)) for i in range(4))
        return digests + "\n" + dump
    if kind == "base64":
        return base64.b64encode(rng.randbytes(rng.randint(180, 360))).decode()
    if kind == "uuid":
        return "\n".join(str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(10))
    raise ValueError(kind)


def dense_samples() -> list[tuple[str, str]]:
    """(class, text) for every sample, always the same list."""
    rng = random.Random(24)
    out: list[tuple[str, str]] = []
    for kind, texts in (("chinese", CHINESE), ("japanese", JAPANESE), ("korean", KOREAN), ("russian", RUSSIAN),
                        ("code_english", CODE_ENGLISH)):
        out.extend((kind, t) for t in texts)
    for kind in ("digits", "numbers", "hex", "base64", "uuid"):
        out.extend((kind, _machine(kind, rng)) for _ in range(3))
    return out
