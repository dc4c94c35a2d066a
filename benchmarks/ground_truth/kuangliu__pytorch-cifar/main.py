'''Train CIFAR10 with PyTorch.'''
# Copied from kuangliu/pytorch-cifar (main.py, MIT licence: LICENSE beside this file) for gpulint's
# ground-truth suite (benchmarks/runtime_ground_truth.py). Changed, and nothing else:
# - synthetic data in place of the CIFAR-10 download: a Dataset that makes each 32x32 image from
#   its index, as torchvision's FakeData does, and the same augmentation written with tensor ops
#   (torchvision is not needed); 50,000 training and 1,000 test images;
# - LeNet (models/lenet.py, the repository's own) in place of SimpleDLA, so a step takes tens of
#   milliseconds on a CPU; the progress bar's terminal width falls back to 80 columns (utils.py);
# - one bottleneck chosen by GT_BOTTLENECK (default none, "healthy"):
#     loader      each image is stored compressed at 256x256 and decoded and shrunk when read
#     logging     every weight written to a log file as text every step, each line fsync'ed
#     validation  test() every step instead of every epoch
# - the script's own phase timers (data, compute, logging, validation, checkpoint; the suite's
#   ../phase_timers.py, on PYTHONPATH), written as JSON to GT_TIMERS at exit, and GT_THREADS
#   (default 1) intra-op threads.
import torch
import torch.nn as nn
import torch.optim as optim
import torch.nn.functional as F
import torch.backends.cudnn as cudnn

import os
import argparse
import tempfile
import zlib

from models import *
from utils import progress_bar

import phase_timers
from phase_timers import new_step, timed


BOTTLENECK = os.environ.get('GT_BOTTLENECK', 'healthy')
torch.set_num_threads(int(os.environ.get('GT_THREADS', '1')))
phase_timers.start(('data', 'compute', 'logging', 'validation', 'checkpoint'))


class FakeCIFAR10(torch.utils.data.Dataset):
    '''Random 32x32 images made from their index (torchvision's FakeData), ten classes.'''

    def __init__(self, size, seed, transform, stored_compressed=False):
        self.size, self.seed, self.transform = size, seed, transform
        self.stored_compressed = stored_compressed

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(self.seed + index)
        target = int(torch.randint(0, 10, (1,), generator=generator))
        if self.stored_compressed:
            # the photograph as a file holds it: larger than the network's input, compressed
            side = 256
            pixels = torch.randint(0, 256, (3, side // 8, side // 8), dtype=torch.uint8, generator=generator)
            encoded = zlib.compress(pixels.repeat_interleave(8, 1).repeat_interleave(8, 2).numpy().tobytes(), 6)
            decoded = torch.frombuffer(bytearray(zlib.decompress(encoded)), dtype=torch.uint8).view(3, side, side)
            image = F.interpolate(decoded[None].float(), size=(32, 32), mode='area')[0].to(torch.uint8)
        else:
            image = torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8, generator=generator)
        return self.transform(image), target


MEAN = torch.tensor((0.4914, 0.4822, 0.4465)).view(3, 1, 1)
STD = torch.tensor((0.2023, 0.1994, 0.2010)).view(3, 1, 1)


def transform_train(image):
    # RandomCrop(32, padding=4), RandomHorizontalFlip(), ToTensor(), Normalize(...)
    padded = F.pad(image, (4, 4, 4, 4))
    top, left = torch.randint(0, 9, (2,)).tolist()
    image = padded[:, top:top + 32, left:left + 32]
    if torch.rand(()) < 0.5:
        image = image.flip(2)
    return (image.float() / 255 - MEAN) / STD


def transform_test(image):
    return (image.float() / 255 - MEAN) / STD


parser = argparse.ArgumentParser(description='PyTorch CIFAR10 Training')
parser.add_argument('--lr', default=0.1, type=float, help='learning rate')
parser.add_argument('--resume', '-r', action='store_true',
                    help='resume from checkpoint')
args = parser.parse_args()

device = 'cuda' if torch.cuda.is_available() else 'cpu'
best_acc = 0  # best test accuracy
start_epoch = 0  # start from epoch 0 or last checkpoint epoch

# Data
print('==> Preparing data..')
trainset = FakeCIFAR10(50000, 0, transform_train, stored_compressed=BOTTLENECK == 'loader')
trainloader = torch.utils.data.DataLoader(
    trainset, batch_size=128, shuffle=True, num_workers=2)

testset = FakeCIFAR10(1000, 10**6, transform_test)
testloader = torch.utils.data.DataLoader(
    testset, batch_size=100, shuffle=False, num_workers=2)

classes = ('plane', 'car', 'bird', 'cat', 'deer',
           'dog', 'frog', 'horse', 'ship', 'truck')

# Model
print('==> Building model..')
net = LeNet()
net = net.to(device)
if device == 'cuda':
    net = torch.nn.DataParallel(net)
    cudnn.benchmark = True

if args.resume:
    # Load checkpoint.
    print('==> Resuming from checkpoint..')
    assert os.path.isdir('checkpoint'), 'Error: no checkpoint directory found!'
    checkpoint = torch.load('./checkpoint/ckpt.pth')
    net.load_state_dict(checkpoint['net'])
    best_acc = checkpoint['acc']
    start_epoch = checkpoint['epoch']

criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=args.lr,
                      momentum=0.9, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=200)
log = open(os.path.join(tempfile.mkdtemp(), 'weights.log'), 'a')
checkpoint_dir = tempfile.mkdtemp()


# Training
def train(epoch):
    print('\nEpoch: %d' % epoch)
    net.train()
    train_loss = 0
    correct = 0
    total = 0
    batches = enumerate(trainloader)
    while True:
        with timed('data'):
            try:
                batch_idx, (inputs, targets) = next(batches)
            except StopIteration:
                break
        with timed('compute'):
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            new_step()
            optimizer.step()

        train_loss += loss.item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()

        progress_bar(batch_idx, len(trainloader), 'Loss: %.3f | Acc: %.3f%% (%d/%d)'
                     % (train_loss/(batch_idx+1), 100.*correct/total, correct, total))
        if BOTTLENECK == 'logging':
            with timed('logging'):
                for name, parameter in net.named_parameters():
                    log.write('%d %d %s %s\n' % (epoch, batch_idx, name, ' '.join(
                        '%.6f' % value for value in parameter.detach().flatten().tolist())))
                    log.flush()
                    os.fsync(log.fileno())
        if BOTTLENECK == 'validation':
            with timed('validation'):
                test(epoch)
            net.train()


def test(epoch):
    global best_acc
    net.eval()
    test_loss = 0
    correct = 0
    total = 0
    with torch.no_grad():
        for batch_idx, (inputs, targets) in enumerate(testloader):
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = net(inputs)
            loss = criterion(outputs, targets)

            test_loss += loss.item()
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()

            progress_bar(batch_idx, len(testloader), 'Loss: %.3f | Acc: %.3f%% (%d/%d)'
                         % (test_loss/(batch_idx+1), 100.*correct/total, correct, total))

    # Save checkpoint.
    acc = 100.*correct/total
    if acc > best_acc:
        with timed('checkpoint'):
            print('Saving..')
            state = {
                'net': net.state_dict(),
                'acc': acc,
                'epoch': epoch,
            }
            torch.save(state, os.path.join(checkpoint_dir, 'ckpt.pth'))
        best_acc = acc


for epoch in range(start_epoch, start_epoch+200):
    train(epoch)
    with timed('validation'):
        test(epoch)
    scheduler.step()
